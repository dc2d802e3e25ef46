#include <catch2/catch.hpp>

#include <idem/lease_token.hpp>

#include <set>

TEST_CASE("lease token: fresh tokens differ and round-trip through hex", "[lease_token]") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto token = idem::lease_token::generate();
    CHECK(token != idem::lease_token{});
    const std::string hex = token.to_string();
    REQUIRE(hex.size() == 32);
    CHECK(idem::lease_token::parse(hex) == token);
    seen.insert(hex);
  }
  CHECK(seen.size() == 1000);
  CHECK_FALSE(idem::lease_token::parse("xyz").has_value());
  CHECK_FALSE(idem::lease_token::parse(std::string(32, 'G')).has_value());
  CHECK(idem::lease_token(1, 2).to_string() == "00000000000000010000000000000002");
}
