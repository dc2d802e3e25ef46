// tests/reliability/soak_redis_test.cpp — the soak (soak.hpp) on a redis_store over the "redis"
// fixture's server, under a prefix of its own (deleted at the end). Sockets: command connections
// open lazily up to pool_size and must never be replaced; the subscriber connection stays one.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <idem/lease_token.hpp>
#include <idem/redis_store.hpp>

#include "reliability/soak.hpp"
#include "reliability/soak_redis_cleanup.hpp"

namespace {

// host:port the fixture wrote to $IDEM_REDIS_DIR/address.
std::pair<std::string, int> fixture_address() {
  const char* dir = std::getenv("IDEM_REDIS_DIR");
  if (dir == nullptr) throw std::runtime_error("IDEM_REDIS_DIR is not set: run through ctest, whose fixture starts redis");
  std::ifstream in(std::filesystem::path(dir) / "address");
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error(std::string("no redis address in ") + dir);
  const auto colon = line.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("malformed redis address " + line);
  return {line.substr(0, colon), std::stoi(line.substr(colon + 1))};
}

}  // namespace

TEST_CASE("redis_store: bounded mixed traffic leaks nothing and runs no completed key twice", "[soak]") {
  const auto [host, port] = fixture_address();
  const std::string prefix = "soak:" + idem::lease_token::generate().to_string().substr(0, 12) + ":";
  {
    idem::redis_store_options options;
    options.host = host;
    options.port = port;
    options.prefix = prefix;
    idem::redis_store store{options};
    idem::soak::store_probe probe;
    probe.max_connections = options.pool_size;
    probe.connections_opened = [&store] { return store.statistics().connections_opened; };
    probe.extra = [&store] {
      const auto st = store.statistics();
      return "round trips " + std::to_string(st.round_trips) + ", pub/sub wake-ups " + std::to_string(st.wakeups) +
             ", answered from a message " + std::to_string(st.message_answers);
    };
    idem::soak::run("redis_store", store, probe, idem::soak::settings::from_environment());
  }
  idem::soak::delete_prefix(host, port, prefix);
}
