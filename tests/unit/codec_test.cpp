#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <idem/codec.hpp>
#include <idem/errors.hpp>
#include <idem/json_codec.hpp>

namespace {
struct receipt {
  std::string id;
  int cents = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(receipt, id, cents)
  friend bool operator==(const receipt&, const receipt&) = default;
};
struct receipt_codec {  // a codec for one type
  idem::payload encode(const receipt& r) const { return {"test/receipt", r.id + "|" + std::to_string(r.cents), {}}; }
  receipt decode(const idem::payload& p) const {
    const auto bar = p.body.find('|');
    return {p.body.substr(0, bar), std::stoi(p.body.substr(bar + 1))};
  }
};
struct no_json {  // neither to_json nor from_json
  int value = 0;
};
}  // namespace

static_assert(idem::codec_for<idem::json_codec, receipt>);
static_assert(idem::codec_for<receipt_codec, receipt>);
static_assert(!idem::codec_for<receipt_codec, int>);
static_assert(idem::codec_for<idem::string_codec, std::string>);
// json_codec is constrained: a type nlohmann::json cannot convert is not a json_codec type (the
// generator's codec check fails at the attribute instead of deep inside nlohmann/json).
static_assert(!idem::codec_for<idem::json_codec, no_json>);
static_assert(!idem::codec_for<idem::json_codec, std::optional<no_json>>);
static_assert(idem::codec_for<idem::json_codec, std::optional<receipt>>);
static_assert(idem::codec_for<idem::json_codec, std::optional<int>>);

TEST_CASE("codec: json_codec stores an empty std::optional as null and reads it back", "[codec]") {
  const idem::json_codec codec;
  const idem::payload empty = codec.encode(std::optional<receipt>{});
  CHECK(empty.body == "null");
  CHECK_FALSE(idem::decode_with<std::optional<receipt>>(codec, empty).has_value());
  const std::optional<receipt> some = receipt{"r-2", 7};
  CHECK(idem::decode_with<std::optional<receipt>>(codec, codec.encode(some)) == some);
}

TEST_CASE("codec: json_codec round-trips and refuses foreign payloads", "[codec]") {
  const receipt r{"r-1", 1250};
  const idem::json_codec codec;
  const idem::payload p = codec.encode(r);
  CHECK(p.type == "application/json");
  CHECK(idem::decode_with<receipt>(codec, p) == r);
  CHECK_THROWS_AS(idem::decode_with<receipt>(codec, idem::payload::none()), idem::corrupt_record_error);
  CHECK_THROWS_AS(idem::decode_with<receipt>(codec, idem::payload{"application/json", "{\"id\": 3}", {}}),
                  idem::corrupt_record_error);
}

namespace {
// Whether `a` and `b` are the same JSON value down to the kind of every number (nlohmann's == calls
// 1 and 1u equal): what from_json of a user's type may look at.
bool same_value(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key()) || !same_value(it.value(), b.at(it.key()))) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same_value(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}
}  // namespace

TEST_CASE("codec: json_codec reads stored text as nlohmann::json::parse would", "[codec]") {
  // What nlohmann writes: every kind of value, numbers at the limits of each kind, escapes, nesting.
  const nlohmann::json written = {
      {"null", nullptr},
      {"bools", {true, false}},
      {"unsigned", {0u, 1u, std::numeric_limits<std::uint64_t>::max(), std::uint64_t{1} << 63}},
      {"signed", {-1, std::numeric_limits<std::int64_t>::min()}},
      {"doubles", {0.5, -0.0, 1e300, -2.5e-308, 0.1 + 0.2, 123456789.0}},
      {"strings", {"", "plain", "quote \" backslash \\ tab \t newline \n nul " + std::string(1, '\0'), "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80"}},
      {"nested", {{"a", {{"b", {1, {2, {3, nlohmann::json::object()}}}}}}, {"empty", nlohmann::json::array()}}},
  };
  const nlohmann::json read = idem::detail::parse_stored_json(written.dump());
  CHECK(read == written);  // by value: `written` holds 1 as a signed integer, text spells no kind
  CHECK(same_value(read, nlohmann::json::parse(written.dump())));
  CHECK(read.dump() == written.dump());

  // Texts nlohmann would not write but reads: whitespace, names out of order, a repeated name (the
  // last counts), escapes it would not use, integers it would parse as signed or unsigned.
  for (const std::string text :
       {R"( { "b" : 1 , "a" : [ -1 , 0 , 9223372036854775807 , 9223372036854775808 , -9223372036854775808 ] } )",
        R"({"k":1,"k":2,"k":"last"})", R"("\u00e9\ud83d\ude00\/")", R"(17)", R"([1.5E3,2e-2,-0.0])"}) {
    INFO(text);
    CHECK(same_value(idem::detail::parse_stored_json(text), nlohmann::json::parse(text)));
  }
}

TEST_CASE("codec: json_codec refuses text that is not JSON with corrupt_record_error, quoting none of it", "[codec]") {
  const std::string secret = "secret-4471";
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  const std::vector<std::string> texts = {"", "   ", "{\"" + secret + "\":", "[1,2,]", "{\"a\":1} {\"b\":2}",
                                         "\"" + secret + "\x80\"", "'single'", "NaN", "01", "[1] " + secret, deep};
  for (const std::string& text : texts) {
    INFO(text.size());
    try {
      (void)idem::detail::parse_stored_json(text);
      FAIL("accepted");
    } catch (const idem::corrupt_record_error& e) {
      CHECK(std::string(e.what()).find(secret) == std::string::npos);
    }
  }
}

TEST_CASE("codec: json_codec reads nesting up to its max_depth and refuses one more", "[codec]") {
  STATIC_REQUIRE(idem::json_codec::max_depth == 1024);  // the limit its documentation states
  const auto nested = [](std::size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  CHECK(idem::detail::parse_stored_json(nested(idem::json_codec::max_depth)).is_array());
  CHECK_THROWS_AS(idem::detail::parse_stored_json(nested(idem::json_codec::max_depth + 1)), idem::corrupt_record_error);
  // Both ways a text is parsed: on the thread's reused parser and, past 16 KiB, on one of its own.
  const std::string padding(20 * 1024, ' ');
  CHECK(idem::detail::parse_stored_json(nested(idem::json_codec::max_depth) + padding).is_array());
  CHECK_THROWS_AS(idem::detail::parse_stored_json(nested(idem::json_codec::max_depth + 1) + padding),
                  idem::corrupt_record_error);
}

TEST_CASE("codec: a decoded value is taken apart innermost first, down to json_codec's max_depth", "[codec]") {
  nlohmann::json value = idem::detail::parse_stored_json(R"({"a":[1,{"b":[2,"three"]}],"c":"text","d":{}})");
  idem::detail::dismantle(value);
  CHECK(value.is_object());  // the kind stays: only what it held is gone
  CHECK(value.empty());
  nlohmann::json list = idem::detail::parse_stored_json(R"([[1,[2]],{"e":null}])");
  idem::detail::dismantle(list);
  CHECK(list.is_array());
  CHECK(list.empty());

  // The deepest value json_codec reads back decodes (and is taken apart after) as nlohmann reads it.
  const std::string deepest = std::string(idem::json_codec::max_depth, '[') + std::string(idem::json_codec::max_depth, ']');
  const idem::payload stored{std::string(idem::json_codec::type), deepest, {}};
  CHECK(idem::json_codec{}.decode<nlohmann::json>(stored) == nlohmann::json::parse(deepest));

  // A value nested far deeper (one to encode may be): taken apart down to max_depth, the rest left
  // to nlohmann's destructor, which needs no call stack for it; recursing all the way would
  // overflow the stack here.
  nlohmann::json tower = nlohmann::json::array();
  for (int level = 0; level < 1'000'000; ++level) tower = nlohmann::json::array({std::move(tower)});
  idem::detail::dismantle(tower);
  CHECK(tower.is_array());
  CHECK(tower.empty());
}

TEST_CASE("codec: json_codec reads a large result, and a small one after it on the same thread", "[codec]") {
  // Large texts are parsed on a parser of their own: the thread's reused one must still work after.
  std::vector<std::string> many(20000, "line of a large result");
  const idem::json_codec codec;
  const idem::payload large = codec.encode(many);
  REQUIRE(large.body.size() > 256 * 1024);
  CHECK(idem::decode_with<std::vector<std::string>>(codec, large) == many);
  const receipt r{"after", 3};
  CHECK(idem::decode_with<receipt>(codec, codec.encode(r)) == r);
  const std::map<std::string, std::vector<int>> small{{"x", {1, 2}}, {"y", {}}};
  CHECK((idem::decode_with<std::map<std::string, std::vector<int>>>(codec, codec.encode(small)) == small));
}

TEST_CASE("codec: json_codec writes the text nlohmann::json::dump writes", "[codec]") {
  const std::vector<nlohmann::json> values = {
      nullptr, true, false, 0, -1, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::uint64_t>::max(),
      0.1, 1.0, -0.0, 1e300, 5e-324, "", "quote \" backslash \\ tab \t newline \n nul " + std::string(1, '\0'),
      "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80 \x7f \x1f", nlohmann::json::object(), nlohmann::json::array(),
      nlohmann::json::parse(R"({"b":[1,{"c":null}],"a":{"x":[[],{}]},"":-2.5})")};
  const idem::json_codec codec;
  for (const nlohmann::json& value : values) {
    CAPTURE(value.dump());
    CHECK(idem::detail::dump_json(value) == value.dump());
    CHECK(codec.encode(value).body == value.dump());
  }
}

TEST_CASE("codec: a value json_codec cannot write throws as dump does, and the next one is written whole", "[codec]") {
  const idem::json_codec codec;
  const std::string not_utf8 = std::string(1000, 'a') + "\xff";  // part of it written before the throw
  CHECK_THROWS_AS(codec.encode(not_utf8), nlohmann::json::type_error);
  const receipt r{"after the failure", 9};
  CHECK(codec.encode(r).body == nlohmann::json(r).dump());
}

TEST_CASE("codec: json_codec writes a large text, and small ones around it on the same thread", "[codec]") {
  // A large text leaves the thread with its buffer: the next one is written from an empty buffer.
  const std::vector<std::string> many(20000, "line of a large result");
  const receipt small{"small", 1};
  const idem::json_codec codec;
  for (int round = 0; round < 2; ++round) {
    CHECK(codec.encode(small).body == nlohmann::json(small).dump());
    const idem::payload large = codec.encode(many);
    REQUIRE(large.body.size() > 256 * 1024);
    CHECK(large.body == nlohmann::json(many).dump());
  }
  CHECK(codec.encode(small).body == nlohmann::json(small).dump());
}

TEST_CASE("codec: a single-type codec decodes through decode_with", "[codec]") {
  const receipt_codec codec;
  CHECK(idem::decode_with<receipt>(codec, codec.encode({"x", 7})) == receipt{"x", 7});
}

TEST_CASE("payload: none is distinct from an empty body with a real type", "[codec]") {
  CHECK(idem::payload::none().is_none());
  CHECK_FALSE((idem::payload{"text/plain", "", {}}).is_none());
  CHECK(idem::payload::none() != idem::payload{"text/plain", "", {}});
}
