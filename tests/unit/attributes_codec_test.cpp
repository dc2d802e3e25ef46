// The binary attributes codec the SQL stores share: byte-exact, and strict about damaged bytes.
#include <catch2/catch.hpp>

#include <idem/detail/attributes_codec.hpp>

using idem::detail::attribute_map;
using idem::detail::decode_attributes;
using idem::detail::encode_attributes;

TEST_CASE("attributes codec: round-trips any bytes, NULs and empty strings included", "[codec]") {
  const attribute_map attributes{{"", "empty name"}, {"status", "200"}, {std::string("a\0b", 3), std::string("\0\xff", 2)},
                                 {"empty", ""}};
  const std::string bytes = encode_attributes(attributes);
  const auto decoded = decode_attributes(bytes);
  REQUIRE(decoded);
  CHECK(*decoded == attributes);
  CHECK(encode_attributes({}).empty());
  CHECK(decode_attributes("") == attribute_map{});
}

TEST_CASE("attributes codec: big-endian lengths, pairs in name order", "[codec]") {
  CHECK(encode_attributes({{"b", "2"}, {"a", "1"}}) == std::string("\0\0\0\1a\0\0\0\0011\0\0\0\1b\0\0\0\0012", 20));
}

TEST_CASE("attributes codec: truncated, trailing or repeated input is refused, never misread", "[codec]") {
  const std::string good = encode_attributes({{"status", "200"}, {"type", "json"}});
  for (std::size_t cut = 1; cut < good.size(); ++cut) {
    INFO("cut at " << cut);
    const auto decoded = decode_attributes(std::string_view(good).substr(0, cut));
    // A cut may fall exactly between two pairs: then it is the first pair alone, never garbage.
    if (decoded) CHECK(*decoded == attribute_map{{"status", "200"}});
  }
  CHECK_FALSE(decode_attributes(good + "x"));
  const std::string one = encode_attributes({{"k", "v"}});
  CHECK_FALSE(decode_attributes(one + one));                            // a name twice
  CHECK_FALSE(decode_attributes(std::string("\xff\xff\xff\xff", 4)));  // a length past the end
}

// Found by tests/fuzz (attributes): names out of order decoded, so two byte strings meant one map.
TEST_CASE("attributes codec: names out of ascending order are refused, so each map has one encoding", "[codec]") {
  const std::string b = encode_attributes({{"b", "1"}});
  const std::string a = encode_attributes({{"a", "2"}});
  CHECK(decode_attributes(a + b) == attribute_map{{"a", "2"}, {"b", "1"}});
  CHECK_FALSE(decode_attributes(b + a));
}
