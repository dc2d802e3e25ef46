// tests/redis/redis_support.hpp — the redis-server the tests run against, and raw access to it.
#pragma once

#include <chrono>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <idem/redis_store.hpp>

#include "connection.hpp"

namespace idem::redis_test {

// host and port of a redis-server.
struct address {
  std::string host;
  int port = 0;
};

// The fixture's server, read from $IDEM_REDIS_DIR/address — or, when the tests run against a Redis
// Cluster ($IDEM_REDIS_CLUSTER_DIR is set: tests/redis_cluster builds these sources a second time),
// the cluster's first node. Throws (failing the case, never skipping it) when the variable or the
// file is missing.
address fixture_address();

// True when the tests run against the fixture's Redis Cluster.
bool on_cluster();

// A prefix no other case or run uses: "idem-test:<hint>:<random hex>:".
std::string unique_prefix(std::string_view hint);

// Options for a store on `where` under `prefix` with short timeouts; cluster mode, seeded with
// every node, when `where` is the fixture's cluster.
redis_store_options test_options(const address& where, std::string prefix = "idem-test:");

// A validated context for `id`: ttl 1 h, lease 30 s, and `wait` (default: look once, never block).
context make_context(const identity& id, std::chrono::milliseconds wait = std::chrono::milliseconds{0});

// A store on the fixture's server.
std::unique_ptr<redis_store> fixture_store(std::string prefix = "idem-test:");

// idem::redis_test::raw_redis
//
// A plain connection for looking at and tampering with what the store wrote. On the fixture's
// cluster a command that a node answers with MOVED is sent again to the node named, and keys()
// scans every master.
class raw_redis {
 public:
  explicit raw_redis(const address& where);
  // Runs one command; returns its reply (error replies included).
  detail::redis::reply_ptr run(std::initializer_list<std::string_view> args);
  detail::redis::reply_ptr run(const std::vector<std::string>& args);
  // The reply as text (bulk or status), "" for nil; fails the case on an error reply.
  std::string text(std::initializer_list<std::string_view> args);
  // The reply as an integer; fails the case on anything else.
  long long integer(std::initializer_list<std::string_view> args);
  // Every key matching `pattern`, via SCAN.
  std::vector<std::string> keys(std::string_view pattern);
  // Runs one command on the node that serves `key` (any node outside a cluster).
  detail::redis::reply_ptr run_where(std::string_view key, const std::vector<std::string>& args);
  detail::redis::connection& connection() { return *conn_; }

 private:
  detail::redis::connection& connection_to(const std::string& address);
  detail::redis::reply_ptr run_on(detail::redis::connection& conn, detail::redis::command& cmd);

  std::unique_ptr<detail::redis::connection> conn_;
  bool cluster_ = false;
  std::vector<std::pair<std::string, std::unique_ptr<detail::redis::connection>>> nodes_;
};

// idem::redis_test::private_server
//
// A redis-server of the case's own, started with tests/support/redis-server.sh in a fresh temporary
// directory, for cases that stop and restart Redis. Stopped when destroyed.
class private_server {
 public:
  private_server();
  ~private_server();
  private_server(const private_server&) = delete;
  private_server& operator=(const private_server&) = delete;

  address where() const { return {"127.0.0.1", port_}; }
  // Stops the server (its data is gone: nothing is persisted).
  void stop();
  // Starts it again on the same port.
  void start();

 private:
  std::filesystem::path dir_;
  int port_ = 0;
};

}  // namespace idem::redis_test
