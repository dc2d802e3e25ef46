// runtime/redis/topology.hpp — which Redis node serves which record: one node, or the masters of a
// Redis Cluster and their slot map.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "connection.hpp"
#include "connection_pool.hpp"
#include "hash_slot.hpp"
#include "subscriber.hpp"

#include "../core/store_loop.hpp"

namespace idem::detail::redis {

// One Redis server the store talks to: its command connections and its subscriber connection.
struct node {
  node(endpoint where, std::size_t pool_size, bool sharded, store_loop& loop);
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  const std::string address;  // "host:port"
  connection_pool pool;
  subscriber hub;
  // When a connection to the node last failed (steady clock ticks; 0 = never): a slot-map refresh
  // asks such nodes last, so that a dead master does not cost every refresh a connect timeout.
  std::atomic<std::int64_t> failed_at{0};
};

// idem::detail::redis::topology
//
// Standalone: one node serves every record. Cluster: the slot map of a Redis Cluster, learned with
// `CLUSTER SHARDS` from any node that answers (the seeds first, then every node seen since),
// loaded on first use and refreshed after a redirection or a connection failure. Lookups read an
// array of 16384 atomic pointers, so routing a call costs no lock and no round trip. Nodes are
// created on first sight and live as long as the topology (a cluster has few), so a node reference
// stays valid. Thread-safe.
class topology {
 public:
  // Standalone: `where` serves every slot. `loop` serves the connections' asynchronous calls and
  // must outlive the topology.
  topology(endpoint where, std::size_t pool_size, store_loop& loop);
  // Cluster: `seeds` are "host:port" of nodes to discover the cluster from; `base` gives the
  // credentials and timeouts of every node.
  topology(endpoint base, std::vector<std::string> seeds, std::size_t pool_size, store_loop& loop);
  topology(const topology&) = delete;
  topology& operator=(const topology&) = delete;

  bool cluster() const noexcept { return cluster_; }

  // The node serving `slot` (any value when standalone). Loads the slot map on first use. Throws
  // io_failure (nothing was sent) when no node answers or no master serves the slot.
  node& owner(int slot);
  // The node serving `slot` when that is known without a round trip (the map is loaded and names
  // an owner), else null.
  node* known_owner(int slot) const noexcept;

  // Redis answered `MOVED <slot> <address>`: the slot's owner is patched at once and the whole map
  // refreshed (at most every refresh_interval). Returns the new owner. `asked` is the node that
  // answered, whose host stands in for an address without one.
  node& moved(int slot, std::string_view address, const node& asked);
  // The node at `address` (an `ASK` answer), created on first sight.
  node& at(std::string_view address, const node& asked);

  // Asks the cluster for the slot map again unless that was done within refresh_interval (or
  // `force`). No-op when standalone. Throws io_failure when no node answers.
  void refresh(bool force = false);

  // A connection to `n` failed: later refreshes ask it after the nodes that did not fail lately.
  static void note_failure(node& n) noexcept;

  // The nodes that serve slots (standalone: the one node). Loads the slot map on first use.
  std::vector<node*> masters();
  // Every node known, masters or not.
  std::vector<node*> nodes() const;

  std::uint64_t refreshes() const noexcept { return refreshes_.load(std::memory_order_relaxed); }
  // Command connections opened and pub/sub messages received, summed over every node.
  std::uint64_t connections_opened() const noexcept;
  std::uint64_t messages() const noexcept;
  std::uint64_t subscriber_connects() const noexcept;

  // The shortest time between two refreshes that are not forced.
  static constexpr std::chrono::milliseconds refresh_interval{20};

 private:
  node& node_at_locked(std::string_view host, int port);
  void load_locked();
  bool apply_shards_locked(const redisReply& shards);

  const bool cluster_;
  endpoint base_;
  std::size_t pool_size_;
  std::vector<std::string> seeds_;
  store_loop& loop_;

  mutable std::mutex mutex_;  // nodes_, loading; refreshes are serialised by it
  std::deque<std::unique_ptr<node>> nodes_;
  std::chrono::steady_clock::time_point last_refresh_{};
  std::atomic<bool> loaded_{false};
  std::array<std::atomic<node*>, slot_count> slots_{};
  std::atomic<std::uint64_t> refreshes_{0};
};

// "host:port" split at its last ':'. Returns false when the port is not a number in 1..65535.
bool parse_address(std::string_view address, std::string& host, int& port);

}  // namespace idem::detail::redis
