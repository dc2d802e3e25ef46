#include <catch2/catch.hpp>

#include <idem/lease_token.hpp>

#include <array>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

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

TEST_CASE("lease token: hex() holds the characters of to_string() in place", "[lease_token]") {
  const idem::lease_token edges(0xfedcba9876543210ULL, 0x0123456789abcdefULL);
  const std::array<char, 32> digits = edges.hex();
  CHECK(std::string_view(digits.data(), digits.size()) == "fedcba98765432100123456789abcdef");
  for (int i = 0; i < 100; ++i) {
    const auto token = idem::lease_token::generate();
    const std::array<char, 32> hex = token.hex();
    CHECK(std::string_view(hex.data(), hex.size()) == token.to_string());
    CHECK(idem::lease_token::parse(std::string_view(hex.data(), hex.size())) == token);
  }
}

TEST_CASE("lease token: consecutive tokens of one thread differ in their first hex digits", "[lease_token]") {
  // Tests and tools cut a token's prefix for unique names (directories, key prefixes, tables):
  // the prefix must change from token to token, not stay a per-thread constant.
  std::set<std::string> prefixes;
  for (int i = 0; i < 1000; ++i) prefixes.insert(idem::lease_token::generate().to_string().substr(0, 12));
  CHECK(prefixes.size() == 1000);
}

TEST_CASE("lease token: threads issue tokens none of which another thread repeats", "[lease_token]") {
  // Each thread has its own random stream: two threads starting together must not share one.
  constexpr int threads = 8;
  constexpr int per_thread = 2000;
  std::vector<std::vector<idem::lease_token>> issued(threads);
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&issued, t] {
        for (int i = 0; i < per_thread; ++i) issued[static_cast<std::size_t>(t)].push_back(idem::lease_token::generate());
      });
  }
  std::set<std::string> seen;
  std::set<std::uint64_t> streams;
  for (const auto& tokens : issued)
    for (const auto& token : tokens) {
      seen.insert(token.to_string());
      streams.insert(token.low());
    }
  CHECK(seen.size() == std::size_t{threads} * per_thread);
  CHECK(streams.size() == std::size_t{threads});
}

TEST_CASE("lease_token: 16 big-endian bytes and back, the form binary columns store", "[lease_token]") {
  const idem::lease_token token(0x0102030405060708ULL, 0x090a0b0c0d0e0f10ULL);
  const auto bytes = token.to_bytes();
  CHECK(bytes[0] == 0x01);
  CHECK(bytes[7] == 0x08);
  CHECK(bytes[8] == 0x09);
  CHECK(bytes[15] == 0x10);
  const std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  CHECK(idem::lease_token::from_bytes(view) == token);
  CHECK_FALSE(idem::lease_token::from_bytes(view.substr(0, 15)));
  CHECK_FALSE(idem::lease_token::from_bytes(std::string(17, 'x')));
}
