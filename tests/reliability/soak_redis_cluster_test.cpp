// tests/reliability/soak_redis_cluster_test.cpp — the soak (soak.hpp) on a redis_store in cluster
// mode over the "redis_cluster" fixture (3 masters, one replica each), under a prefix of its own
// (deleted from every master at the end). Sockets: a command pool per master opens lazily up to
// pool_size, and a subscriber connection per master with waiters; none may be replaced.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <idem/lease_token.hpp>
#include <idem/redis_store.hpp>

#include "reliability/soak.hpp"
#include "reliability/soak_redis_cleanup.hpp"

namespace {

// The nodes the fixture wrote to $IDEM_REDIS_CLUSTER_DIR/seeds, one host:port per line.
std::vector<std::string> fixture_nodes() {
  const char* dir = std::getenv("IDEM_REDIS_CLUSTER_DIR");
  if (dir == nullptr) throw std::runtime_error("IDEM_REDIS_CLUSTER_DIR is not set: run through ctest");
  std::ifstream in(std::filesystem::path(dir) / "seeds");
  std::vector<std::string> nodes;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) nodes.push_back(line);
  }
  if (nodes.empty()) throw std::runtime_error(std::string("no cluster nodes in ") + dir);
  return nodes;
}

std::pair<std::string, int> split(const std::string& node) {
  const auto colon = node.rfind(':');
  return {node.substr(0, colon), std::stoi(node.substr(colon + 1))};
}

// Deletes every key under `prefix` on every node (replicas refuse the writes; their masters' go).
void delete_prefix(const std::vector<std::string>& nodes, const std::string& prefix) {
  for (const std::string& node : nodes) {
    const auto [host, port] = split(node);
    idem::soak::delete_prefix(host, port, prefix);
  }
}

}  // namespace

TEST_CASE("redis_store in cluster mode: bounded mixed traffic leaks nothing and runs no completed key twice",
          "[soak]") {
  const auto nodes = fixture_nodes();
  const std::string prefix = "soak:" + idem::lease_token::generate().to_string().substr(0, 12) + ":";
  {
    idem::redis_store_options options;
    std::tie(options.host, options.port) = split(nodes.front());
    options.cluster.enabled = true;
    options.cluster.seeds.assign(nodes.begin() + 1, nodes.end());
    options.prefix = prefix;
    options.pool_size = 8;
    idem::redis_store store{options};
    idem::soak::store_probe probe;
    constexpr std::size_t masters = 3;
    probe.max_connections = (options.pool_size + 1) * masters;  // a pool and a subscriber per master
    probe.prime_waits = 64;  // random slots: all three masters get a waiter (a miss: 3 x (2/3)^64)
    probe.connections_opened = [&store] {
      const auto st = store.statistics();
      return st.connections_opened + st.subscriber_connects;
    };
    probe.extra = [&store] {
      const auto st = store.statistics();
      return "round trips " + std::to_string(st.round_trips) + ", pub/sub wake-ups " + std::to_string(st.wakeups) +
             ", answered from a message " + std::to_string(st.message_answers) + ", redirections " +
             std::to_string(st.redirections) + ", slot-map loads " + std::to_string(st.slot_map_refreshes) +
             ", subscriber connections " + std::to_string(st.subscriber_connects);
    };
    idem::soak::run("redis_store (cluster)", store, probe, idem::soak::settings::from_environment());
    CHECK(store.statistics().redirections == 0);       // nothing moved: every call went straight to its master
    CHECK(store.statistics().slot_map_refreshes == 1);
  }
  delete_prefix(nodes, prefix);
}
