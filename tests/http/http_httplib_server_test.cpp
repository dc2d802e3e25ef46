// tests/http/http_httplib_server_test.cpp — what idem::http::apply_limits gives a cpp-httplib
// server against clients that would take more than their share: slow heads do not starve a
// normal request while fewer than `threads` connections drip, too many header fields are answered
// 431 and the connection closed, and an answer given before the body was read closes the
// connection even when the client asked to keep it. Real sockets on 127.0.0.1.
#include "http_test_support.hpp"

#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/memory_store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using idem::http_test::key_header;
using idem::http_test::raw_socket;
using idem::http_test::test_server;

namespace {

struct server_rig {
  explicit server_rig(idem::http::httplib_limits limits = {}) : http(limits) {
    idem::http::guard(http.server, "POST", "/things", engine, {"Test.httplib", {}, {.max_body_bytes = 16, .log = nullptr}},
                      [this](const httplib::Request&, httplib::Response& res) {
                        res.status = 201;
                        res.set_content("run " + std::to_string(++runs), "text/plain");
                      });
    http.start();
  }
  idem::memory_store store;
  idem::engine engine{store, idem::config{.purge_interval = 0ms}};
  std::atomic<int> runs{0};
  test_server http;
};

}  // namespace

TEST_CASE("httplib server: 200 connections dripping their heads do not keep a normal request from its answer",
          "[http][httplib]") {
  server_rig t;  // the default limits: 256 threads
  std::vector<std::unique_ptr<raw_socket>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<raw_socket>(t.http.port()));
    slow.back()->send("POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // and then one line now and then
  }
  for (int line = 0; line < 3; ++line)
    for (auto& s : slow) s->send("X-Drip-" + std::to_string(line) + ": still coming\r\n");
  auto c = t.http.client();
  c.set_read_timeout(10s);  // a bound, not a measurement
  auto answer = c.Post("/things", key_header("normal"), "x", "text/plain");
  REQUIRE(answer);
  CHECK(answer->status == 201);
  CHECK(t.runs == 1);
}

TEST_CASE("httplib server: 10,000 header fields are answered 431 and the connection closed", "[http][httplib]") {
  server_rig t;
  {
    raw_socket s(t.http.port());
    std::string request = "POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: many\r\n";
    for (int i = 0; i < 10000; ++i) request += "X-" + std::to_string(i) + ": y\r\n";
    s.send(request + "Content-Length: 1\r\n\r\nx");
    const std::string head = s.head();
    CHECK(head.rfind("HTTP/1.1 431", 0) == 0);
    CHECK(head.find("application/problem+json") != std::string::npos);
    CHECK(s.closed());
  }
  CHECK(t.runs == 0);
  auto answer = t.http.client().Post("/things", key_header("after"), "x", "text/plain");
  REQUIRE(answer);
  CHECK(answer->status == 201);
}

TEST_CASE("httplib server: a body answered before it was read closes the connection even when the client asked to "
          "keep it",
          "[http][httplib]") {
  server_rig t;
  raw_socket s(t.http.port());
  s.send("POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\nIdempotency-Key: big\r\n"
         "Content-Type: text/plain\r\nContent-Length: 64\r\n\r\n" +
         std::string(64, 'x'));
  const std::string head = s.head();
  CHECK(head.rfind("HTTP/1.1 413", 0) == 0);
  CHECK(head.find("Connection: close") != std::string::npos);
  CHECK(head.find("Keep-Alive") == std::string::npos);
  CHECK(s.closed());
  CHECK(t.runs == 0);
}

TEST_CASE("httplib server: apply_limits refuses a zero limit", "[http][httplib]") {
  httplib::Server server;
  CHECK_THROWS_AS(idem::http::apply_limits(server, {.threads = 0}), idem::configuration_error);
  CHECK_THROWS_AS(idem::http::apply_limits(server, {.keep_alive_max = 0}), idem::configuration_error);
  CHECK_THROWS_AS(idem::http::apply_limits(server, {.max_header_count = 0}), idem::configuration_error);
}
