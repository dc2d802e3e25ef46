// tests/http/http_unit_test.cpp — the key parser, the stored-response codec (including hostile
// bytes) and the protocol options, without a server.
#include <catch2/catch.hpp>

#include <idem/errors.hpp>
#include <idem/http/endpoint.hpp>
#include <idem/http/response.hpp>

#include <random>
#include <string>

using namespace idem::http;

TEST_CASE("parse_key: an sf-string and its unquoted form are the same key", "[http][key]") {
  CHECK(parse_key(R"("abc-123")").key == "abc-123");
  CHECK(parse_key("abc-123").key == "abc-123");
  CHECK(parse_key("  \"abc\"\t").key == "abc");
  CHECK(parse_key(R"("a \"quoted\" \\ key")").key == R"(a "quoted" \ key)");
  CHECK(parse_key(R"("with space")").key == "with space");
  CHECK(parse_key("8e03978e-40d5-43e8-bc93-6894a57f9324").ok());
}

TEST_CASE("parse_key: empty, too long or malformed values are refused without quoting them", "[http][key]") {
  const std::string secret = "s3cr3t";
  for (const std::string& bad :
       {std::string(), std::string("\"\""), std::string("   "), "\"" + secret, "\"" + secret + "\"x", secret + " x",
        "\"" + secret + "\\n\"", "\"" + secret + "\x01\"", secret + "\"", "\"" + secret + "\xc3\xa9\"",
        secret + "\\"}) {
    const key_parse_result r = parse_key(bad);
    INFO("value size " << bad.size());
    CHECK_FALSE(r.ok());
    CHECK(r.key.empty());
    CHECK(r.problem.find(secret) == std::string::npos);
  }
  CHECK(parse_key(std::string(255, 'k')).ok());
  CHECK_FALSE(parse_key(std::string(256, 'k')).ok());
  CHECK(parse_key("\"" + std::string(255, 'k') + "\"").ok());
  CHECK_FALSE(parse_key("\"" + std::string(256, 'k') + "\"").ok());
}

TEST_CASE("codec: status, headers in order with repeats, and binary body round-trip", "[http][codec]") {
  response r;
  r.status = 201;
  r.headers = {{"Location", "/payments/1"}, {"X-Multi", "a"}, {"Content-Type", "application/octet-stream"},
               {"X-Multi", "b"}, {"x-multi", "c"}, {"X-Empty", ""}};
  for (int c = 0; c < 256; ++c) r.body.push_back(static_cast<char>(c));
  r.body += std::string("\0\0tail", 6);
  const idem::payload p = encode_response(r);
  CHECK(p.type == "http/response");
  CHECK(decode_response(p) == r);

  response empty{204, {}, {}};
  CHECK(decode_response(encode_response(empty)) == empty);
}

TEST_CASE("codec: unsafe responses are refused when encoding", "[http][codec]") {
  CHECK_THROWS_AS(encode_response({99, {}, {}}), std::invalid_argument);
  CHECK_THROWS_AS(encode_response({600, {}, {}}), std::invalid_argument);
  CHECK_THROWS_AS(encode_response({200, {{"Bad Name", "v"}}, {}}), std::invalid_argument);
  CHECK_THROWS_AS(encode_response({200, {{"X-Split", "a\r\nSet-Cookie: x"}}, {}}), std::invalid_argument);
}

TEST_CASE("codec: every truncation and a flood of random mutations give corrupt_record_error, never a crash",
          "[http][codec]") {
  response r{200, {{"Content-Type", "text/plain"}, {"X-A", "1"}, {"X-A", "2"}}, "hello, world"};
  const idem::payload good = encode_response(r);
  for (std::size_t n = 0; n < good.body.size(); ++n) {
    idem::payload cut = good;
    cut.body.resize(n);
    INFO("truncated to " << n);
    CHECK_THROWS_AS(decode_response(cut), idem::corrupt_record_error);
  }
  idem::payload longer = good;
  longer.body += 'x';
  CHECK_THROWS_AS(decode_response(longer), idem::corrupt_record_error);

  idem::payload other = good;
  other.type = "json";
  CHECK_THROWS_AS(decode_response(other), idem::corrupt_record_error);

  // A header count of 2^32-1 in a tiny record must be refused before anything is reserved.
  idem::payload huge = good;
  huge.body.replace(3, 4, "\xff\xff\xff\xff");
  CHECK_THROWS_AS(decode_response(huge), idem::corrupt_record_error);

  // A header value with CR LF written into the record (response splitting on replay) is refused.
  idem::payload split = encode_response({200, {{"X-A", "ab"}}, ""});
  split.body[split.body.size() - 4 - 2] = '\r';
  split.body[split.body.size() - 4 - 1] = '\n';
  CHECK_THROWS_AS(decode_response(split), idem::corrupt_record_error);

  std::mt19937 rng(12345);
  std::size_t decoded = 0;
  for (int round = 0; round < 20000; ++round) {
    idem::payload p = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) p.body[rng() % p.body.size()] = static_cast<char>(rng() & 0xff);
    try {
      const response d = decode_response(p);
      ++decoded;  // a mutation inside the body or a value may still be a valid record
      CHECK(d.status >= 100);
      CHECK(d.status <= 599);
    } catch (const idem::corrupt_record_error& e) {
      CHECK(std::string(e.what()).find("damaged") != std::string::npos);
    }
  }
  CHECK(decoded < 20000);
}

TEST_CASE("protocol options: the header must be a token and the in-flight status an error status", "[http][options]") {
  protocol_options o;
  CHECK_NOTHROW(o.validate());
  o.key_header = "Bad Header";
  CHECK_THROWS_AS(o.validate(), idem::configuration_error);
  o.key_header = "";
  CHECK_THROWS_AS(o.validate(), idem::configuration_error);
  o.key_header = "X-Request-Key";
  o.in_flight_status = 200;
  CHECK_THROWS_AS(o.validate(), idem::configuration_error);
  o.in_flight_status = 503;
  CHECK_NOTHROW(o.validate());
}

TEST_CASE("default sanitiser drops cookies and credentials, keeps the rest in order", "[http][options]") {
  response r{200,
             {{"Set-Cookie", "a=1"}, {"Location", "/x"}, {"authorization", "Bearer t"}, {"ETag", "\"1\""},
              {"WWW-Authenticate", "Basic"}, {"set-cookie", "b=2"}},
             "body"};
  default_sanitizer(r);
  CHECK(r.headers == std::vector<header>{{"Location", "/x"}, {"ETag", "\"1\""}});
}

TEST_CASE("problem: application/problem+json with title, detail and status", "[http]") {
  const response p = problem(409, "Request in progress", "retry later");
  CHECK(p.status == 409);
  REQUIRE(p.find("content-type") != nullptr);
  CHECK(*p.find("content-type") == "application/problem+json");
  CHECK(p.body == R"({"detail":"retry later","status":409,"title":"Request in progress","type":"about:blank"})");
}
