// tests/redis_cluster/cluster_support.hpp — the Redis Clusters the cluster tests run against, and
// raw access to their nodes.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <idem/redis_store.hpp>

#include "connection.hpp"

namespace idem::cluster_test {

namespace rd = idem::detail::redis;

// What CLUSTER NODES says of one node.
struct node_info {
  std::string id;
  std::string address;  // "127.0.0.1:<port>"
  int port = 0;
  bool master = false;
  bool failed = false;    // flagged fail (or fail?) by the node asked
  std::string master_id;  // a replica's master
  std::vector<std::pair<int, int>> slots;  // a master's slot ranges
};

// idem::cluster_test::cluster
//
// A cluster of 3 masters with one replica each on 127.0.0.1: the ctest fixture's (its seeds in
// $IDEM_REDIS_CLUSTER_DIR/seeds), or a private one that tests/support/redis-cluster.sh starts in a
// fresh temporary directory and stops when the object is destroyed (for cases that kill nodes or
// move slots). Throws, failing the case, when the cluster cannot be found or started.
class cluster {
 public:
  struct fixture_tag {};
  explicit cluster(fixture_tag);
  cluster();  // a private cluster
  ~cluster();
  cluster(const cluster&) = delete;
  cluster& operator=(const cluster&) = delete;

  const std::vector<std::string>& seeds() const { return seeds_; }
  // Options for a cluster store under `prefix` with short timeouts.
  redis_store_options options(std::string prefix) const;

  // One command on the node at `address` (a fresh connection per node, kept).
  rd::reply_ptr run(const std::string& address, const std::vector<std::string>& args);
  // CLUSTER NODES as seen by the first node that answers (skipping `except`).
  std::vector<node_info> nodes(const std::string& except = "");
  // The master serving `slot`, as the first node that answers sees it.
  node_info master_of(int slot, const std::string& except = "");
  // How many keys matching `pattern` the node holds (SCAN).
  std::size_t count_keys(const std::string& address, const std::string& pattern);
  // The pid of the redis-server on `port` (private clusters and the fixture alike).
  int pid_of(int port) const;
  // True when every node that is up says cluster_state:ok.
  bool healthy();

 private:
  std::filesystem::path dir_;
  bool owned_ = false;
  std::vector<std::string> seeds_;
  std::vector<std::pair<std::string, std::unique_ptr<rd::connection>>> connections_;
};

// A prefix no other case or run uses: "idem-cluster-test:<hint>:<random hex>:".
std::string unique_prefix(std::string_view hint);

}  // namespace idem::cluster_test
