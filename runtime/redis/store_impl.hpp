// runtime/redis/store_impl.hpp — what redis_store's files share: the store's state, its script
// calls (one state machine behind the blocking and the asynchronous entry points) and the reading
// of the scripts' answers.
#pragma once

#include <idem/redis_store.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <idem/async.hpp>
#include <idem/deadline.hpp>
#include <idem/detail/waiter_count.hpp>
#include <idem/errors.hpp>
#include <idem/identity.hpp>

#include "completed_cache.hpp"
#include "connection.hpp"
#include "../core/store_loop.hpp"
#include "record_codec.hpp"
#include "retry_pacing.hpp"
#include "scripts.hpp"
#include "topology.hpp"

namespace idem {

namespace rd = detail::redis;

// Durations handed to the scripts are cut to max_stored_duration (idem/deadline.hpp): Lua numbers
// are doubles.
inline std::chrono::milliseconds capped(std::chrono::milliseconds d) { return stored_duration(d); }

struct redis_store::impl {
  using milliseconds = std::chrono::milliseconds;
  using steady = std::chrono::steady_clock;

  explicit impl(redis_store_options o);
  // Stops the loop first: asynchronous calls still pending are answered store_unavailable_error.
  ~impl();

  static std::string decimal_of(milliseconds d) { return std::string(rd::decimal(d.count()).view()); }

  // One operation's view of the record, for messages.
  struct target {
    std::string_view operation;
    const identity* id;  // null for purge
    std::string describe() const { return id == nullptr ? std::string() : " " + id->to_string(); }
    std::string record() const { return id == nullptr ? std::string() : id->to_string(); }
  };

  // --- errors --------------------------------------------------------------------------------
  // Where a failed command went, for messages: the node, or the cluster when no node was chosen.
  std::string server(const rd::node* n) const;
  // A command that failed; when it was sent and not answered, Redis may have run it or may still.
  [[noreturn]] void unavailable(const target& t, const rd::node* n, const rd::io_failure& e) const;
  [[noreturn]] void unavailable(const target& t, const rd::node* n, std::string_view reason) const;
  [[noreturn]] static void unexpected(const target& t);
  // Codes every script shares: foreign data, unknown format, malformed record.
  [[noreturn]] void refuse(const target& t, std::string_view code, std::string_view detail) const;
  [[noreturn]] static void lease_lost(const target& t, std::string_view code);
  void check_durability(const target& t, long long acknowledged) const;

  // --- routing -------------------------------------------------------------------------------
  // The hash slot of a record key (0 for a single server, where slots do not exist).
  int slot_of(std::string_view key) const noexcept { return topo.cluster() ? rd::hash_slot(key) : 0; }
  // The node serving `slot`, or store_unavailable_error.
  rd::node& owner_of(const target& t, int slot);
  // `<prefix>rec:<scope>:<hex>`; in a cluster `<prefix>rec:{<hex>:<scope>}`.
  std::string key_of(const identity& id) const;
  // The inverse of key_of: the scope and the key's digest of a record key, or nullopt for a key
  // key_of cannot have made.
  std::optional<std::pair<std::string, std::array<unsigned char, 32>>> identity_of(std::string_view key) const;
  // The channel of the record at `key`: the same suffix under `<prefix>evt:`.
  std::string channel_for(std::string_view key) const;

  // --- script calls ----------------------------------------------------------------------------
  // What a script call returns: the script's reply (never an error reply) and WAIT's count.
  struct outcome {
    rd::reply_ptr reply;
    long long acknowledged = -1;  // replicas that acknowledged, -1 when WAIT was not sent
  };
  // What an asynchronous script call (run_async) answers.
  using outcome_handler = std::function<void(std::exception_ptr, outcome)>;

  // One call of a script in progress: what it sends where, and what its replies taught so far.
  // It runs `s` on the node serving keys[0] with EVALSHA, once more with EVAL if that node lost
  // its script cache, and optionally pipelines WAIT behind it. In a cluster it follows MOVED (the
  // slot map is patched and refreshed) and ASK (ASKING is pipelined before the script on the
  // importing node). TRYAGAIN, CLUSTERDOWN and redirections beyond stable_redirections (masters
  // that send the slot to each other: a reshard being finished) are transient: they are retried
  // with a growing pause (retry_pacing) until command_timeout has passed since the first of them.
  // After a node could not be reached it retries once when a fresh slot map names another owner
  // (a failover). A command that was sent and not answered is not retried, but the slot map is
  // refreshed for the next call. `keys` and `args` must outlive the call; so must the object
  // itself stay where it is (its commands view its numbers).
  struct script_call {
    script_call(const impl& d, target t, const rd::script& s, std::span<const std::string_view> keys,
                std::span<const std::string_view> args, bool wait_for_replicas);
    script_call(const script_call&) = delete;
    script_call& operator=(const script_call&) = delete;

    target t;
    const rd::script& s;
    std::span<const std::string_view> keys;
    std::span<const std::string_view> args;
    const bool with_wait;
    const int slot;
    const rd::decimal numkeys, replicas, wait_ms;
    rd::node* node = nullptr;
    bool use_eval = false;
    bool asking = false;
    bool rerouted = false;
    int redirected = 0;
    rd::retry_pacing pacing;
    // This round trip: [ASKING] script [WAIT]; unused slots allocate nothing.
    std::array<rd::command, 3> commands;
    std::array<rd::reply_ptr, 3> replies;
    std::size_t count = 0;
    std::size_t script_at = 0;
    // An asynchronous round trip's handler while the round trip is in flight: the connection's
    // handler then holds two pointers, which std::function keeps inline, not a handler of its own.
    outcome_handler pending_handler;
  };
  // What a stable slot map may take to reach a record: a MOVED (the map was stale), then an ASK
  // (the slot is migrating and the record already moved).
  static constexpr int stable_redirections = 2;

  // The round trip's commands, from what the call learned so far.
  void prepare(script_call& c) const;
  // After the replies arrived: true when the call is done (result() has its outcome), false when
  // it must be sent again. Throws the store's errors. In a cluster it may refresh the slot map
  // and pause (blocking) for a transient answer; never for a reply that `settles_at_once`.
  bool after_reply(script_call& c);
  // After the round trip failed: returns when the call must be sent again, else throws.
  void after_failure(script_call& c, const rd::io_failure& e);
  // Whether after_reply / after_failure can run without blocking: any reply but a cluster's
  // redirection or refusal, and a failure of a single server.
  bool settles_at_once(const script_call& c, const rd::io_failure* failure) const noexcept;
  outcome result(script_call& c) const;

  // The call from here on, blocking until its outcome.
  outcome run_blocking(script_call& c);
  outcome eval(const target& t, const rd::script& s, std::span<const std::string_view> keys,
               std::span<const std::string_view> args, bool wait_for_replicas) {
    script_call c(*this, t, s, keys, args, wait_for_replicas);
    return run_blocking(c);
  }
  // The call without a parked thread: round trips on the event loop; what needs a blocking step (a
  // connection to open, a cluster's redirection) continues on the shared blocking pool. `c` must
  // live until `done` ran; `done` runs once, on a thread of the store.
  void run_async(script_call& c, outcome_handler done);
  // run_async's round trip on `conn`, open already.
  void send_async(script_call& c, rd::multiplexed_connection& conn, outcome_handler done);
  // run_async's next step once a round trip ended (`failure` null: the replies are in `c`).
  void answered(script_call& c, const rd::io_failure* failure, outcome_handler done);
  // The call on a thread of the shared blocking pool: `step` (true: done), then run_blocking.
  void continue_blocking(script_call& c, outcome_handler done, std::function<bool()> step);

  // WAIT on its own, on the node serving `key`, after a mutation whose script could not carry it.
  long long wait_for_replicas(const target& t, std::string_view key);
  long long wait_for_replicas(const target& t, rd::node& node);

  // --- the scripts' answers -------------------------------------------------------------------
  // A script's answer (one flat string, runtime/redis/lua/common.lua): the code before the first
  // space and the text after it.
  struct answer {
    std::string_view code;
    std::string_view rest;
    std::string_view whole;
  };
  static answer read_answer(const target& t, const redisReply& reply);
  // Splits "<first> <second>" at its first space.
  static std::pair<std::string_view, std::string_view> split(const target& t, std::string_view text);
  static std::int64_t number(const target& t, std::string_view text);

  // A lease token's hex characters as the text a script is given.
  static std::string_view text_of(const std::array<char, 32>& hex) noexcept { return {hex.data(), hex.size()}; }

  // The bytes one acquire, complete or release call sends; the arrays view the strings.
  struct acquire_request {
    acquire_request(const impl& d, const context& ctx, std::string record_key);
    acquire_request(const acquire_request&) = delete;
    acquire_request& operator=(const acquire_request&) = delete;
    const std::string key;
    const lease_token token;
    const std::array<char, 32> token_hex;
    const std::string lease_ms, ttl_ms, claim_px;
    const std::string_view fingerprint;
    const std::array<std::string_view, 1> keys;
    const std::array<std::string_view, 6> args;
  };
  struct complete_request {
    complete_request(const impl& d, const identity& id, const lease_token& token, const payload& value,
                     milliseconds ttl);
    complete_request(const complete_request&) = delete;
    complete_request& operator=(const complete_request&) = delete;
    const std::string key, chan;
    const std::array<char, 32> token_hex;
    const std::string ttl_ms, encoded, complete_px;
    const std::array<std::string_view, 1> keys;
    const std::array<std::string_view, 6> args;
  };
  struct release_request {
    release_request(const impl& d, const identity& id, std::string record_key, std::string token);
    release_request(const release_request&) = delete;
    release_request& operator=(const release_request&) = delete;
    const std::string key, chan, token_text;
    const std::array<std::string_view, 1> keys;
    const std::array<std::string_view, 3> args;
  };

  // One look at the record: the answer, or that another token holds it and for how long.
  struct look {
    acquire_result answer;
    bool busy = false;
    steady::time_point lease_until;  // when busy: the holder's lease end on our clock
    std::string holder;              // when busy: the holder's token
  };
  // The acquire script's answer to `r`, sent at `sent_at`. With replica_ack, a claim waits for
  // the replicas (blocking) and is given up when too few acknowledge.
  look read_look(const context& ctx, const acquire_request& r, outcome& out, steady::time_point sent_at);
  // A blocking look: the acquire script's round trip and its answer.
  look check(const context& ctx, const acquire_request& r);
  // `value` is what was completed, for the local cache: null when the cache is off.
  void read_complete(const target& t, const complete_request& r, const payload* value, milliseconds ttl,
                     const outcome& out, steady::time_point sent_at);
  void read_release(const target& t, const outcome& out) const;
  void release_record(const identity& id, const std::string& key, std::string_view token_text);
  // The same without a parked thread (async_calls.cpp).
  void async_release_record(const identity& id, const std::string& key, std::string_view token_text, async_done done);

  // A complete record -> the duplicate; remembered when the cache is on (`expires` is then the
  // record's end on our clock).
  duplicate replay(const target& t, std::string_view value, const std::string& key,
                   std::optional<steady::time_point> expires);
  // A cached completion of `key`, answered without a round trip; nullopt when there is none.
  std::optional<acquire_result> cached(const context& ctx, const std::string& key, steady::time_point now);
  // A waiter's shortcut: the complete script publishes "c <token> <record>". When `token` is the
  // holder this waiter saw, the record is now complete with exactly this value (a completion is
  // final until its ttl ends), so the waiter answers from the message without a round trip.
  // Anything else (a release, another holder's completion, a malformed message): nullopt, look again.
  static std::optional<acquire_result> from_message(const context& ctx, std::string_view message,
                                                    std::string_view holder);
  void remember(const std::string& key, const duplicate& d, std::string stored_fingerprint,
                steady::time_point record_expiry, steady::time_point now);

  // A duplicate's wait for the holder (record_wait.hpp) and the asynchronous operations
  // (async_calls.cpp).
  class record_wait;
  struct async_acquire;
  template <class Request>
  struct async_mutation;

  // --- administration (administration.cpp) ------------------------------------------------------
  // Calls `visit(key)` for every record key on every master (SCAN, one full pass each).
  void for_each_record_key(const target& t, const std::function<void(const std::string&)>& visit);
  // One record read with admin_read (`bytes` "0": the whole value), or nullopt when it is gone.
  std::optional<record_summary> read_summary(const target& t, const std::string& key, std::string_view bytes);

  // --- purge (purge.cpp) ------------------------------------------------------------------------
  std::size_t purge_node(const target& t, rd::node& node);
  std::size_t purge_page(const target& t, rd::node& node, std::vector<std::string>& keys, std::string_view header_bytes);

  redis_store_options options;
  rd::endpoint where;
  detail::store_loop loop;  // before the topology: its connections and waiters point to it
  rd::topology topo;
  const std::string_view publish;  // PUBLISH, or SPUBLISH (sharded pub/sub) in a cluster
  std::unique_ptr<rd::completed_cache> cache;
  const std::string record_prefix;
  const std::string channel_prefix;
  const std::string scan_pattern;
  const std::string grace;

  std::mutex purge_mutex;
  std::unordered_map<const rd::node*, std::string> purge_cursors;  // per node; absent = "0"

  std::atomic<std::uint64_t> round_trips{0};
  std::atomic<std::uint64_t> script_reloads{0};
  std::atomic<std::uint64_t> cache_hits{0};
  std::atomic<std::uint64_t> message_answers{0};
  std::atomic<std::uint64_t> redirections{0};
  std::atomic<std::uint64_t> cluster_retries{0};
  detail::waiter_count waiting;
};

}  // namespace idem
