// idem/redis_store.hpp — a store on Redis through hiredis, shared by every process that uses the
// same Redis (one server, or a Redis Cluster) and prefix.
//
//   idem::redis_store store{{.host = "127.0.0.1", .port = 6379, .prefix = "orders:idem:"}};
//   idem::redis_store sharded{{.host = "10.0.0.1", .port = 7000, .cluster = {.enabled = true}}};
//   idem::engine engine{store};
//
// Every transition is one Lua script sent with EVALSHA (reloaded with EVAL when Redis answers
// NOSCRIPT) that reads the clock with Redis TIME, so the first call costs two round trips
// (claim, complete) and a replay one. A record is one string value (a short header, then the
// payload) at `<prefix>rec:<scope>:<hex SHA-256 of the key>`; the raw key never reaches Redis. A duplicate waits on pub/sub: the complete and release
// scripts PUBLISH on `<prefix>evt:<scope>:<hex>`, one subscriber connection per store carries every
// waiter's subscription, and a waiter re-checks the record after its subscription is confirmed so
// that no wake-up is lost. In a Redis Cluster every call goes to the master of its record's slot
// and a waiter subscribes there with sharded pub/sub. docs/stores/redis.md has the record layout,
// the ACL, the cluster's guarantees and the consistency rules of the local cache.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <idem/event_loop.hpp>
#include <idem/store.hpp>

namespace idem {

// Replica acknowledgement: after every mutation the store pipelines `WAIT replicas timeout` with the
// script (no extra round trip) and throws durability_error when fewer replicas acknowledged it.
struct redis_replica_ack {
  int replicas = 0;                           // 0 = do not wait for replicas
  std::chrono::milliseconds timeout{100};     // >= 1 ms when replicas > 0, < command_timeout
};

// The optional in-process cache of completed records. A hit answers try_acquire without a round
// trip; in-progress records are never cached. Consistency rules: docs/stores/redis.md.
struct redis_local_cache {
  std::size_t max_entries = 0;                 // 0 = no cache; least recently used entries go first
  std::chrono::milliseconds max_age{60'000};   // >= 1 ms: a cached completion is served at most this long
};

// Redis Cluster mode (Redis >= 7: CLUSTER SHARDS, sharded pub/sub). The store learns the slot map
// from host:port or any seed, sends every call to the master of its record's slot, follows MOVED
// and ASK redirections, and retries TRYAGAIN and CLUSTERDOWN answers within command_timeout.
// Every Redis key of a record carries a hash tag made of the record's identity, so each script
// touches one slot and records spread over every master. replica_ack applies per master.
struct redis_cluster_options {
  bool enabled = false;            // host:port (and seeds) are nodes of a Redis Cluster
  std::vector<std::string> seeds;  // more nodes, "host:port", asked for the slot map as well
};

// Settings of a redis_store. An aggregate; the constructor validates it.
struct redis_store_options {
  std::string host = "127.0.0.1";
  int port = 6379;                                   // 1..65535
  std::string username;                              // ACL user (Redis 6+); empty = `default`
  std::string password;                              // empty = no AUTH
  int database = 0;                                  // SELECT; >= 0; 0 in cluster mode
  std::string prefix = "idem:";                      // every key and channel starts with it; not
                                                     // empty; no '{' or '}' in cluster mode
  std::chrono::milliseconds connect_timeout{500};    // >= 1 ms
  std::chrono::milliseconds command_timeout{2'000};  // >= 1 ms: bounds every round trip
  std::size_t pool_size = 16;                        // >= 1 command connections (per master in
                                                     // cluster mode), opened on demand; 1 = every
                                                     // thread pipelines on one
  std::chrono::milliseconds retention_grace{60'000};  // >= 0: an in-progress record's native expiry
                                                     // = logical expiry + this (a complete one's is
                                                     // its logical expiry)
  std::chrono::milliseconds fallback_recheck{50};    // >= 1 ms: a waiter's re-check period while
                                                     // the subscriber connection is down
  std::size_t purge_batch = 500;                     // >= 1: SCAN COUNT per page
  std::size_t purge_max_pages = 100;                 // >= 1: pages per purge_expired() call
  redis_replica_ack replica_ack;
  redis_local_cache local_cache;
  redis_cluster_options cluster;
  // Where asynchronous calls wait for replies and times: null (the default) = a thread of the
  // store's own; the caller's loop (idem::asio::event_loop on an io_context) = replies are read on
  // the caller's threads, with no hop between threads. It must outlive the store.
  std::shared_ptr<idem::event_loop> event_loop;
};

// Counters for tests and metrics; each is monotonic over the store's life.
struct redis_store_statistics {
  std::uint64_t round_trips = 0;       // script (and WAIT) pipelines sent on command connections
  std::uint64_t script_reloads = 0;    // NOSCRIPT answers recovered with EVAL
  std::uint64_t cache_hits = 0;        // try_acquire answered by the local cache
  std::uint64_t connections_opened = 0;  // command connections opened
  std::uint64_t wakeups = 0;           // pub/sub messages received by the subscriber connection
  std::uint64_t subscriber_connects = 0;  // subscriber connections opened (one per server with
                                          // waiters, and again after each drop)
  std::uint64_t message_answers = 0;   // waiters answered from a completion message, no round trip
  std::uint64_t redirections = 0;      // cluster: MOVED and ASK answers followed
  std::uint64_t cluster_retries = 0;   // cluster: paced retries (TRYAGAIN, CLUSTERDOWN, masters redirecting to each other)
  std::uint64_t slot_map_refreshes = 0;  // cluster: slot maps learned with CLUSTER SHARDS
};

// idem::redis_store
//
// A store on one Redis server (standalone or the primary of a Sentinel setup) or, with
// `cluster.enabled`, on a Redis Cluster. Thread-safe. Command connections are multiplexed and
// opened on demand (per master in a cluster): a call takes a connection with nothing in flight,
// opens another while fewer than pool_size are open, and beyond that pipelines on the least busy
// one. A caller alone on a connection never hops threads. A broken
// connection fails the calls in flight on it and is replaced on the next call, which is how the
// store recovers by itself after Redis restarts. Waiting never holds a command connection. Not
// copyable or movable.
class redis_store final : public store {
 public:
  // Validates `options` (throws configuration_error naming the field, the value and the rule).
  // Connects lazily: a Redis that is down at construction is reported by the first call.
  explicit redis_store(redis_store_options options);
  // Stops the subscriber thread and closes every connection. No call may be running.
  ~redis_store() override;
  redis_store(const redis_store&) = delete;
  redis_store& operator=(const redis_store&) = delete;

  // One round trip claims, replays or reports the holder (or none: a local-cache hit). With a
  // non-zero wait a busy record is watched through pub/sub and re-checked on each completion or
  // release, when the holder's lease runs out, and every fallback_recheck while the subscriber
  // connection is down. Throws store_unavailable_error (Redis unreachable, timed out or failing),
  // foreign_record_error (the key holds data idem did not write; it is left untouched),
  // corrupt_record_error (an unknown record format) and durability_error.
  acquire_result try_acquire(const context& ctx) override;
  // A replay from the local cache (options.local_cache), else nullopt: never a round trip.
  std::optional<acquire_result> try_acquire_at_once(const context& ctx) override;

  // One round trip. Throws lease_lost_error as the store interface says, plus the errors above.
  void complete(const identity& id, const lease_token& token, const payload& value,
                std::chrono::milliseconds ttl) override;

  // One round trip; deletes the record and wakes its waiters. Throws like complete.
  void release(const identity& id, const lease_token& token) override;

  // One round trip; a silent no-op unless the record is held under `token` (foreign data
  // included). Throws store_unavailable_error and durability_error only.
  bool extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) override;

  // The same three without a thread parked per call, on one reactor thread of the store: a round
  // trip completes when its reply arrives on the multiplexed connection, and a duplicate's wait is
  // a pub/sub registration plus a timer. Opening a connection, loading or following a cluster's
  // slot map and waiting for replicas (replica_ack) take a thread of the shared blocking pool for
  // their step. Handlers run on the reactor's or the subscriber's thread and must not block.
  // Destroying the store answers the calls still waiting store_unavailable_error.
  void async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) override;
  void async_complete(const identity& id, const lease_token& token, const payload& value,
                      std::chrono::milliseconds ttl, async_done done) override;
  void async_release(const identity& id, const lease_token& token, async_done done) override;

  std::size_t waiting() const noexcept override;

  // Scans at most purge_max_pages pages of purge_batch keys under `<prefix>rec:*` (on every
  // master in a cluster), continuing where the previous call stopped (a cursor is kept per node; a
  // full sweep may take several calls), and deletes the expired records idem owns; foreign keys
  // are skipped. Records also carry a native Redis expiry (a complete record's is its logical
  // expiry, an in-progress one's that plus retention_grace), so Redis forgets them without purge.
  // Calls are serialised with one another.
  std::size_t purge_expired() override;

  std::string_view name() const noexcept override { return "redis_store"; }

  // Administration (<idem/store_admin.hpp>). inspect and release are one script on the record's
  // node; list and count SCAN every master (never KEYS) and read each record's header with a
  // script, so they take time in proportion to the records stored. A completed record keeps no
  // acquisition time in Redis: its created_at is its completion time.
  bool supports_administration() const noexcept override { return true; }
  std::optional<record_summary> inspect_record(const identity& id, bool with_payload) override;
  std::vector<record_summary> list_records(const record_query& query) override;
  admin_release release_record(const identity& id, bool end_live_lease) override;
  record_counts count_records() override;

  // The Redis key of `id`'s record: `<prefix>rec:<scope>:<64 hex digits of SHA-256(key)>`, in
  // cluster mode `<prefix>rec:{<64 hex digits>:<scope>}` (the braces make the hash tag).
  std::string record_key(const identity& id) const;
  // The pub/sub channel the scripts publish on when `id`'s record completes or is released.
  std::string channel(const identity& id) const;

  const redis_store_options& options() const noexcept;
  redis_store_statistics statistics() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace idem
