// runtime/redis/redis_store.cpp — idem::redis_store: scripts over a connection pool, waiting on
// pub/sub, an optional cache of completed records.
#include <idem/redis_store.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <idem/deadline.hpp>
#include <idem/detail/waiter_count.hpp>
#include <idem/duration.hpp>
#include <idem/errors.hpp>
#include <idem/identity.hpp>

#include "completed_cache.hpp"
#include "connection.hpp"
#include "connection_pool.hpp"
#include "hash_slot.hpp"
#include "record_codec.hpp"
#include "retry_pacing.hpp"
#include "scripts.hpp"
#include "subscriber.hpp"
#include "topology.hpp"

namespace idem {
namespace {

namespace rd = detail::redis;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

// Durations handed to the scripts are cut to max_stored_duration (idem/deadline.hpp): Lua numbers
// are doubles.
milliseconds capped(milliseconds d) { return stored_duration(d); }

void require(bool ok, std::string_view field, std::string_view got, std::string_view rule) {
  if (ok) return;
  throw configuration_error("redis_store_options." + std::string(field) + " " + std::string(rule) + ", got: " +
                            std::string(got));
}

void require_duration(milliseconds value, milliseconds minimum, std::string_view field) {
  require(value >= minimum, field, format_duration(value),
          "must be at least " + std::to_string(minimum.count()) + "ms");
}

void validate(const redis_store_options& o) {
  require(!o.host.empty(), "host", "\"\"", "must name the Redis server");
  require(o.port >= 1 && o.port <= 65535, "port", std::to_string(o.port), "must be in 1..65535");
  require(o.database >= 0, "database", std::to_string(o.database), "must not be negative");
  require(!o.prefix.empty(), "prefix", "\"\"",
          "must not be empty: every key and channel of the store starts with it, and an empty one "
          "would mix idem's records with the application's keys");
  require(o.username.empty() || !o.password.empty(), "username", o.username,
          "needs a password as well (AUTH username password)");
  require_duration(o.connect_timeout, milliseconds{1}, "connect_timeout");
  require_duration(o.command_timeout, milliseconds{1}, "command_timeout");
  require_duration(o.retention_grace, milliseconds{0}, "retention_grace");
  require_duration(o.fallback_recheck, milliseconds{1}, "fallback_recheck");
  require(o.pool_size >= 1, "pool_size", std::to_string(o.pool_size), "must be at least 1");
  require(o.purge_batch >= 1, "purge_batch", std::to_string(o.purge_batch), "must be at least 1");
  require(o.purge_max_pages >= 1, "purge_max_pages", std::to_string(o.purge_max_pages), "must be at least 1");
  require(o.replica_ack.replicas >= 0, "replica_ack.replicas", std::to_string(o.replica_ack.replicas),
          "must not be negative");
  if (o.replica_ack.replicas > 0) {
    require_duration(o.replica_ack.timeout, milliseconds{1}, "replica_ack.timeout");
    require(o.replica_ack.timeout < o.command_timeout, "replica_ack.timeout", format_duration(o.replica_ack.timeout),
            "must be shorter than command_timeout (" + format_duration(o.command_timeout) +
                "), or every WAIT would time out the connection");
  }
  if (o.local_cache.max_entries > 0) require_duration(o.local_cache.max_age, milliseconds{1}, "local_cache.max_age");
  if (!o.cluster.enabled) {
    require(o.cluster.seeds.empty(), "cluster.seeds", std::to_string(o.cluster.seeds.size()) + " seeds",
            "are only read in cluster mode: set cluster.enabled");
    return;
  }
  require(o.database == 0, "database", std::to_string(o.database),
          "must be 0 in cluster mode (a Redis Cluster has one database)");
  require(o.prefix.find_first_of("{}") == std::string::npos, "prefix", o.prefix,
          "must not contain '{' or '}' in cluster mode: the store puts each record's hash tag in braces");
  for (const std::string& seed : o.cluster.seeds) {
    std::string host;
    int port = 0;
    require(rd::parse_address(seed, host, port) && !host.empty(), "cluster.seeds", "\"" + seed + "\"",
            "must each be host:port with a port in 1..65535");
  }
}

// Every node to ask for the slot map: host:port, then the seeds.
std::vector<std::string> cluster_seeds(const redis_store_options& o) {
  std::vector<std::string> seeds{o.host + ":" + std::to_string(o.port)};
  seeds.insert(seeds.end(), o.cluster.seeds.begin(), o.cluster.seeds.end());
  return seeds;
}

rd::topology make_topology(const redis_store_options& o, const rd::endpoint& where) {
  if (o.cluster.enabled) return rd::topology(where, cluster_seeds(o), o.pool_size);
  return rd::topology(where, o.pool_size);
}

// `*?[]\` escaped for SCAN MATCH.
std::string glob_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}


}  // namespace

// ---------------------------------------------------------------------------------------------

struct redis_store::impl {
  explicit impl(redis_store_options o)
      : options(std::move(o)),
        where{options.host,     options.port,           options.username,       options.password,
              options.database, options.connect_timeout, options.command_timeout},
        topo(make_topology(options, where)),
        publish(options.cluster.enabled ? "SPUBLISH" : "PUBLISH"),
        record_prefix(options.prefix + "rec:"),
        channel_prefix(options.prefix + "evt:"),
        scan_pattern(glob_escape(options.prefix) + "rec:*"),
        grace(decimal_of(capped(options.retention_grace))) {
    if (options.local_cache.max_entries > 0) cache = std::make_unique<rd::completed_cache>(options.local_cache.max_entries);
  }

  static std::string decimal_of(milliseconds d) { return std::string(rd::decimal(d.count()).view()); }

  // One operation's view of the record, for messages.
  struct target {
    std::string_view operation;
    const identity* id;  // null for purge
    std::string describe() const { return id == nullptr ? std::string() : " " + id->to_string(); }
    std::string record() const { return id == nullptr ? std::string() : id->to_string(); }
  };

  // Where a failed command went, for messages: the node, or the cluster when no node was chosen.
  std::string server(const rd::node* n) const {
    if (n != nullptr) return "Redis at " + n->address;
    return "the Redis Cluster at " + where.describe();
  }

  // A command that was sent and not answered: Redis may have run it or may still run it.
  [[noreturn]] void unavailable(const target& t, const rd::node* n, const rd::io_failure& e) const {
    if (!e.outcome_unknown()) unavailable(t, n, std::string_view(e.what()));
    throw outcome_unknown_error("redis_store: cannot " + std::string(t.operation) + t.describe() + ": " + server(n) +
                                    " is unavailable: " + std::string(e.what()) +
                                    "; the command was sent and not answered, whether it took effect is unknown",
                                std::string(t.operation), t.record());
  }

  [[noreturn]] void unavailable(const target& t, const rd::node* n, std::string_view reason) const {
    throw store_unavailable_error("redis_store: cannot " + std::string(t.operation) + t.describe() + ": " +
                                      server(n) + " is unavailable: " + std::string(reason),
                                  std::string(t.operation), t.record());
  }

  // The hash slot of a record key (0 for a single server, where slots do not exist).
  int slot_of(std::string_view key) const noexcept { return topo.cluster() ? rd::hash_slot(key) : 0; }

  // The node serving `slot`, or store_unavailable_error.
  rd::node& owner_of(const target& t, int slot) {
    try {
      return topo.owner(slot);
    } catch (const rd::io_failure& e) {
      unavailable(t, nullptr, e);
    }
  }

  // Runs `s` on the node serving keys[0] with EVALSHA, once more with EVAL if that node lost its
  // script cache, and optionally pipelines WAIT behind it. In a cluster it follows MOVED (the slot
  // map is patched and refreshed) and ASK (ASKING is pipelined before the script on the importing
  // node). TRYAGAIN, CLUSTERDOWN and redirections beyond stable_redirections (masters that send
  // the slot to each other: a reshard being finished) are transient: they are retried with a
  // growing pause (retry_pacing) until command_timeout has passed since the first of them. After a
  // node could not be reached it retries once when a fresh slot map names another owner (a
  // failover). A command that was sent and not answered is not retried, but the slot map is
  // refreshed for the next call. Returns the script's reply (never an error reply) and WAIT's count.
  struct outcome {
    rd::reply_ptr reply;
    long long acknowledged = -1;  // replicas that acknowledged, -1 when WAIT was not sent
  };
  // What a stable slot map may take to reach a record: a MOVED (the map was stale), then an ASK
  // (the slot is migrating and the record already moved).
  static constexpr int stable_redirections = 2;

  outcome eval(const target& t, const rd::script& s, std::span<const std::string_view> keys,
               std::span<const std::string_view> args, bool wait_for_replicas) {
    const rd::decimal numkeys(static_cast<std::int64_t>(keys.size()));
    const rd::decimal replicas(options.replica_ack.replicas);
    const rd::decimal wait_ms(options.replica_ack.timeout.count());
    const bool with_wait = wait_for_replicas && options.replica_ack.replicas > 0;
    const int slot = slot_of(keys.empty() ? std::string_view() : keys[0]);
    rd::node* node = &owner_of(t, slot);
    bool use_eval = false;
    bool asking = false;
    bool rerouted = false;
    int redirected = 0;
    rd::retry_pacing pacing(options.command_timeout);
    for (;;) {
      std::array<rd::command, 3> commands;  // [ASKING] script [WAIT]; unused ones allocate nothing
      std::array<rd::reply_ptr, 3> replies;
      std::size_t n = 0;
      if (asking) (commands[n++] = rd::command(1)).arg("ASKING");
      const std::size_t script_at = n;
      rd::command& cmd = commands[n++];
      cmd.reserve(3 + keys.size() + args.size());
      if (use_eval) {
        cmd.arg("EVAL").arg(s.source);
      } else {
        cmd.arg("EVALSHA").arg(s.sha);
      }
      cmd.arg(numkeys.view());
      for (std::string_view k : keys) cmd.arg(k);
      for (std::string_view a : args) cmd.arg(a);
      if (with_wait) (commands[n++] = rd::command(3)).arg("WAIT").arg(replicas.view()).arg(wait_ms.view());
      try {
        auto conn = node->pool.take();
        conn->exchange(std::span(commands.data(), n), std::span(replies.data(), n), with_wait);
      } catch (const rd::io_failure& e) {
        rd::topology::note_failure(*node);
        rd::node* const failed = node;
        if (topo.cluster()) {
          // The node may be gone and its slots served by a promoted replica: ask the cluster, so
          // that this call (when nothing was sent, once) or at least the next one goes there.
          try {
            topo.refresh();
            node = &topo.owner(slot);
          } catch (const rd::io_failure&) {
          }
          if (!e.outcome_unknown() && !rerouted && node != failed) {
            rerouted = true;
            asking = false;
            continue;
          }
        }
        unavailable(t, failed, e);
      }
      round_trips.fetch_add(1, std::memory_order_relaxed);
      rd::reply_ptr& reply = replies[script_at];
      if (reply->type == REDIS_REPLY_ERROR) {
        const std::string_view message = rd::text(reply.get());
        if (!use_eval && message.starts_with("NOSCRIPT")) {
          script_reloads.fetch_add(1, std::memory_order_relaxed);
          use_eval = true;
          continue;
        }
        if (topo.cluster()) {
          const bool moved = message.starts_with("MOVED ");
          if (moved || message.starts_with("ASK ")) {
            // "MOVED <slot> <host:port>" / "ASK <slot> <host:port>"
            const std::string_view address = message.substr(message.rfind(' ') + 1);
            redirections.fetch_add(1, std::memory_order_relaxed);
            if (++redirected > stable_redirections) {
              // The masters disagree about who serves the slot: wait for them to agree.
              if (!pacing.pause()) {
                unavailable(t, node, "the cluster kept redirecting for " + format_duration(options.command_timeout) +
                                         " (last: " + std::string(message) + ")");
              }
              cluster_retries.fetch_add(1, std::memory_order_relaxed);
            }
            try {
              node = moved ? &topo.moved(slot, address, *node) : &topo.at(address, *node);
            } catch (const rd::io_failure& e) {
              unavailable(t, node, e);
            }
            asking = !moved;
            continue;
          }
          const bool down = message.starts_with("CLUSTERDOWN");
          if (down || message.starts_with("TRYAGAIN")) {
            if (!pacing.pause()) {
              unavailable(t, node, "the cluster kept answering " + std::string(message.substr(0, message.find(' '))) +
                                       " for " + format_duration(options.command_timeout));
            }
            cluster_retries.fetch_add(1, std::memory_order_relaxed);
            if (down) {
              try {
                topo.refresh();
                node = &topo.owner(slot);
              } catch (const rd::io_failure&) {
              }
            }
            continue;
          }
        }
        unavailable(t, node, "the " + std::string(s.name) + " script failed: " + std::string(message));
      }
      outcome out{std::move(reply)};
      if (with_wait) {
        const rd::reply_ptr& acknowledged = replies[script_at + 1];
        if (acknowledged->type != REDIS_REPLY_INTEGER) {
          unavailable(t, node, "WAIT failed: " + std::string(rd::text(acknowledged.get())));
        }
        out.acknowledged = acknowledged->integer;
      }
      return out;
    }
  }

  // WAIT on its own, on the node serving `key`, after a mutation whose script could not carry it.
  long long wait_for_replicas(const target& t, std::string_view key) {
    return wait_for_replicas(t, owner_of(t, slot_of(key)));
  }
  long long wait_for_replicas(const target& t, rd::node& node) {
    const rd::decimal replicas(options.replica_ack.replicas);
    const rd::decimal wait_ms(options.replica_ack.timeout.count());
    try {
      auto conn = node.pool.take();
      rd::command cmd;
      cmd.arg("WAIT").arg(replicas.view()).arg(wait_ms.view());
      rd::reply_ptr reply = conn->run(cmd, true);
      round_trips.fetch_add(1, std::memory_order_relaxed);
      if (reply->type != REDIS_REPLY_INTEGER) unavailable(t, &node, "WAIT failed: " + std::string(rd::text(reply.get())));
      return reply->integer;
    } catch (const rd::io_failure& e) {
      unavailable(t, &node, e);
    }
  }

  void check_durability(const target& t, long long acknowledged) const {
    if (acknowledged < 0 || acknowledged >= options.replica_ack.replicas) return;
    throw durability_error("redis_store: Redis accepted the " + std::string(t.operation) + " of" + t.describe() +
                           ", but only " + std::to_string(acknowledged) + " of the " +
                           std::to_string(options.replica_ack.replicas) + " required replicas acknowledged it within " +
                               format_duration(options.replica_ack.timeout),
                           std::string(t.operation), t.record());
  }

  // A script's answer (one flat string, runtime/redis/lua/common.lua): the code before the first
  // space and the text after it.
  struct answer {
    std::string_view code;
    std::string_view rest;
    std::string_view whole;
  };

  [[noreturn]] static void unexpected(const target& t) {
    throw corrupt_record_error("redis_store: cannot " + std::string(t.operation) + t.describe() +
                               ": unexpected reply from the script (is another version of idem sharing the prefix?)",
                               std::string(t.operation), t.record());
  }

  static answer read_answer(const target& t, const redisReply& reply) {
    if (reply.type != REDIS_REPLY_STRING && reply.type != REDIS_REPLY_STATUS) unexpected(t);
    const std::string_view whole = rd::text(&reply);
    const std::size_t space = whole.find(' ');
    if (space == std::string_view::npos) return {whole, {}, whole};
    return {whole.substr(0, space), whole.substr(space + 1), whole};
  }

  // Splits "<first> <second>" at its first space.
  static std::pair<std::string_view, std::string_view> split(const target& t, std::string_view text) {
    const std::size_t space = text.find(' ');
    if (space == std::string_view::npos) unexpected(t);
    return {text.substr(0, space), text.substr(space + 1)};
  }

  static std::int64_t number(const target& t, std::string_view text) {
    auto value = rd::parse_int(text);
    if (!value) {
      throw corrupt_record_error("redis_store: cannot " + std::string(t.operation) + t.describe() +
                                     ": the record holds a malformed number",
                                 std::string(t.operation), t.record());
    }
    return *value;
  }

  // Codes every script shares: foreign data, unknown format, malformed record.
  [[noreturn]] void refuse(const target& t, std::string_view code, std::string_view detail) const {
    const std::string head = "redis_store: cannot " + std::string(t.operation) + t.describe() + ": ";
    if (code == "F") {
      throw foreign_record_error(head + "its Redis key under the prefix \"" + options.prefix +
                                 "\" holds data idem did not write; it was left untouched. Give idem a prefix of "
                                     "its own",
                                 std::string(t.operation), t.record());
    }
    if (code == "V") {
      throw corrupt_record_error(head + "the record has format version \"" + std::string(detail) +
                                     "\", this version of idem reads format 2 only",
                                 std::string(t.operation), t.record());
    }
    throw corrupt_record_error(head + "the record is malformed (field " + std::string(detail) + ")",
                               std::string(t.operation), t.record());
  }

  [[noreturn]] static void lease_lost(const target& t, std::string_view code) {
    const std::string head = "redis_store: cannot " + std::string(t.operation) + t.describe() + ": ";
    const char* why = code == "MISSING" ? "no record is held under this lease (it is absent or expired)"
                      : code == "DONE"  ? "the record is already complete, so this lease no longer holds it"
                                        : "the lease no longer owns the record (it expired and another caller took it over)";
    throw lease_lost_error(head + why, std::string(t.operation), t.record());
  }

  // One look at the record: the answer, or that another token holds it and for how long.
  struct look {
    acquire_result answer;
    bool busy = false;
    steady::time_point lease_until;  // when busy: the holder's lease end on our clock
    std::string holder;              // when busy: the holder's token
  };

  look check(const context& ctx, const std::string& key, const lease_token& token, const std::string& token_text) {
    const target t{"try_acquire", &ctx.id};
    const std::string lease_ms = decimal_of(capped(ctx.lease));
    const std::string ttl_ms = decimal_of(capped(ctx.ttl));
    const std::string_view fingerprint = ctx.fingerprint ? std::string_view(*ctx.fingerprint) : std::string_view("-");
    const std::array<std::string_view, 1> keys{key};
    const std::string claim_px =
        decimal_of(std::max(capped(ctx.lease), capped(ctx.ttl)) + capped(options.retention_grace));
    const std::array<std::string_view, 6> args{token_text, lease_ms, ttl_ms, fingerprint, claim_px, cache ? "1" : "0"};
    const steady::time_point sent_at = steady::now();
    outcome out = eval(t, rd::scripts().acquire, keys, args, false);
    const answer a = read_answer(t, *out.reply);
    look result;
    if (a.whole.starts_with("idem/")) {
      result.answer = replay(t, a.whole, key, std::nullopt);
    } else if (a.code == "A") {
      if (options.replica_ack.replicas > 0) {
        const long long acknowledged = wait_for_replicas(t, key);
        if (acknowledged < options.replica_ack.replicas) {
          try {
            release_record(ctx.id, key, token_text);  // best effort: do not block the key for a lease
          } catch (const store_error&) {
          }
          check_durability(t, acknowledged);
        }
      }
      result.answer = acquired{token};
    } else if (a.code.starts_with("D")) {  // "D<remaining ttl> <record>", asked for by the cache
      result.answer = replay(t, a.rest, key, saturating_add(sent_at, milliseconds(number(t, a.code.substr(1)))));
    } else if (a.code == "B") {
      const auto [remaining, holder] = split(t, a.rest);
      const milliseconds lease_left(number(t, remaining));
      result.busy = true;
      result.lease_until = saturating_add(sent_at, lease_left);
      result.answer = in_flight{lease_left};
      result.holder = std::string(holder);
    } else if (a.code == "M") {
      result.answer = fingerprint_mismatch{std::string(a.rest), std::string(fingerprint)};
    } else {
      refuse(t, a.code, a.rest);
    }
    return result;
  }

  // A complete record -> the duplicate; remembered when the cache is on (`expires` is then the
  // record's end on our clock).
  duplicate replay(const target& t, std::string_view value, const std::string& key,
                   std::optional<steady::time_point> expires) {
    auto record = rd::decode_complete(value);
    if (!record) {
      throw corrupt_record_error("redis_store: cannot " + std::string(t.operation) + t.describe() +
                                     ": the complete record is malformed",
                                 std::string(t.operation), t.record());
    }
    duplicate d{std::move(record->value), std::chrono::system_clock::time_point(milliseconds(record->completed_at_ms))};
    if (cache && expires) remember(key, d, std::move(record->fingerprint), *expires, steady::now());
    return d;
  }

  // A waiter's shortcut: the complete script publishes "c <token> <record>". When `token` is the
  // holder this waiter saw, the record is now complete with exactly this value (a completion is
  // final until its ttl ends), so the waiter answers from the message without a round trip.
  // Anything else (a release, another holder's completion, a malformed message): nullopt, look again.
  static std::optional<acquire_result> from_message(const context& ctx, std::string_view message,
                                                    std::string_view holder) {
    if (holder.empty() || message.size() < holder.size() + 4 || !message.starts_with("c ") ||
        message.substr(2, holder.size()) != holder || message[2 + holder.size()] != ' ') {
      return std::nullopt;
    }
    auto record = rd::decode_complete(message.substr(3 + holder.size()));
    if (!record) return std::nullopt;
    if (ctx.fingerprint && !record->fingerprint.empty() && record->fingerprint != *ctx.fingerprint) {
      return fingerprint_mismatch{std::move(record->fingerprint), *ctx.fingerprint};
    }
    return duplicate{std::move(record->value), std::chrono::system_clock::time_point(milliseconds(record->completed_at_ms))};
  }

  void remember(const std::string& key, const duplicate& d, std::string stored_fingerprint,
                steady::time_point record_expiry, steady::time_point now) {
    auto entry = std::make_shared<rd::completed_entry>();
    entry->value = d.value;
    entry->completed_at = d.completed_at;
    entry->fingerprint = std::move(stored_fingerprint);
    entry->expires_at = std::min(record_expiry, saturating_add(now, options.local_cache.max_age));
    cache->put(key, std::move(entry));
  }

  void release_record(const identity& id, const std::string& key, std::string_view token_text) {
    const target t{"release", &id};
    const std::string chan = channel_for(key);
    const std::array<std::string_view, 1> keys{key};
    const std::array<std::string_view, 3> args{token_text, chan, publish};
    outcome out = eval(t, rd::scripts().release, keys, args, true);
    const answer a = read_answer(t, *out.reply);
    if (a.code == "OK") {
      check_durability(t, out.acknowledged);
      return;
    }
    if (a.code == "MISSING" || a.code == "DONE" || a.code == "STOLEN") lease_lost(t, a.code);
    refuse(t, a.code, a.rest);
  }

  // One node's share of purge_expired: pages of SCAN from the node's cursor, and for each page one
  // purge script per hash slot among its keys (a script's keys must share a slot in a cluster),
  // all pipelined in one round trip. A slot that moved meanwhile answers MOVED or ASK and is left
  // to the next sweep of its new owner.
  std::size_t purge_node(const target& t, rd::node& node) {
    const rd::decimal count(static_cast<std::int64_t>(options.purge_batch));
    const rd::decimal header_bytes(static_cast<std::int64_t>(rd::max_header_length));
    std::string& cursor = purge_cursors.try_emplace(&node, "0").first->second;
    std::size_t deleted = 0;
    for (std::size_t page = 0; page < options.purge_max_pages; ++page) {
      std::vector<std::string> keys;
      try {
        auto conn = node.pool.take();
        rd::command scan;
        scan.arg("SCAN").arg(cursor).arg("MATCH").arg(scan_pattern).arg("COUNT").arg(count.view());
        rd::reply_ptr reply = conn->run(scan);
        round_trips.fetch_add(1, std::memory_order_relaxed);
        if (reply->type == REDIS_REPLY_ERROR) unavailable(t, &node, "SCAN failed: " + std::string(rd::text(reply.get())));
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[1]->type != REDIS_REPLY_ARRAY) {
          unavailable(t, &node, "SCAN answered something other than a cursor and a page");
        }
        cursor = std::string(rd::text(reply->element[0]));
        const redisReply& page_keys = *reply->element[1];
        keys.reserve(page_keys.elements);
        for (std::size_t i = 0; i < page_keys.elements; ++i) keys.emplace_back(rd::text(page_keys.element[i]));
      } catch (const rd::io_failure& e) {
        unavailable(t, &node, e);
      }
      if (!keys.empty()) {
        const std::size_t n = purge_page(t, node, keys, header_bytes.view());
        deleted += n;
        if (n > 0 && options.replica_ack.replicas > 0) check_durability(t, wait_for_replicas(t, node));
      }
      if (cursor == "0") break;  // one full pass at most per call
    }
    return deleted;
  }

  // Deletes the expired records among `keys` (all on `node`), one script per hash slot, pipelined
  // in one round trip (a single server: one script for the page). Scripts the node has not cached
  // are sent again with EVAL; a group that the node redirects (its slot is moving) is skipped.
  std::size_t purge_page(const target& t, rd::node& node, std::vector<std::string>& keys, std::string_view header_bytes) {
    std::vector<int> slots(keys.size());
    std::vector<std::size_t> order(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      slots[i] = slot_of(keys[i]);
      order[i] = i;
    }
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return slots[a] < slots[b]; });
    struct group {
      std::size_t first, last;  // into `order`
      rd::decimal numkeys;
    };
    std::vector<group> groups;
    for (std::size_t first = 0; first < order.size();) {
      std::size_t last = first + 1;
      while (last < order.size() && slots[order[last]] == slots[order[first]]) ++last;
      groups.push_back({first, last, rd::decimal(static_cast<std::int64_t>(last - first))});
      first = last;
    }
    const rd::script& script = rd::scripts().purge;
    auto commands_for = [&](bool use_eval) {
      std::vector<rd::command> commands(groups.size());
      for (std::size_t g = 0; g < groups.size(); ++g) {
        rd::command& cmd = commands[g];
        cmd.reserve(4 + groups[g].last - groups[g].first);
        if (use_eval) {
          cmd.arg("EVAL").arg(script.source);
        } else {
          cmd.arg("EVALSHA").arg(script.sha);
        }
        cmd.arg(groups[g].numkeys.view());
        for (std::size_t i = groups[g].first; i < groups[g].last; ++i) cmd.arg(keys[order[i]]);
        cmd.arg(header_bytes);
      }
      return commands;
    };
    std::size_t deleted = 0;
    for (bool use_eval : {false, true}) {
      std::vector<rd::command> commands = commands_for(use_eval);
      std::vector<rd::reply_ptr> replies(commands.size());
      try {
        auto conn = node.pool.take();
        conn->exchange(commands, replies);
      } catch (const rd::io_failure& e) {
        unavailable(t, &node, e);
      }
      round_trips.fetch_add(1, std::memory_order_relaxed);
      bool reload = false;
      for (const rd::reply_ptr& reply : replies) {
        if (reply->type == REDIS_REPLY_INTEGER) {
          deleted += static_cast<std::size_t>(std::max<long long>(0, reply->integer));
          continue;
        }
        const std::string_view message = rd::text(reply.get());
        if (reply->type == REDIS_REPLY_ERROR && message.starts_with("NOSCRIPT") && !use_eval) {
          reload = true;
          continue;
        }
        if (reply->type == REDIS_REPLY_ERROR && topo.cluster() &&
            (message.starts_with("MOVED ") || message.starts_with("ASK ") || message.starts_with("TRYAGAIN"))) {
          continue;  // the slot is moving: its new owner's sweep deletes these
        }
        if (reply->type == REDIS_REPLY_ERROR) unavailable(t, &node, "the purge script failed: " + std::string(message));
        unavailable(t, &node, "the purge script answered something other than a count");
      }
      if (!reload) break;
      // Only the groups that answered NOSCRIPT run again (the others deleted their keys already),
      // but resending all is harmless: a second pass finds nothing more to delete.
      script_reloads.fetch_add(1, std::memory_order_relaxed);
    }
    return deleted;
  }

  // `<prefix>rec:<scope>:<hex>`; in a cluster `<prefix>rec:{<hex>:<scope>}`: the record's own hash
  // tag, digest first so that a '}' in the scope still leaves the digest in the tag.
  std::string key_of(const identity& id) const {
    const auto digest = id.key_digest();
    const std::string hex = to_hex(digest.data(), digest.size());
    std::string key;
    key.reserve(record_prefix.size() + id.scope().size() + 3 + hex.size());
    key += record_prefix;
    if (topo.cluster()) {
      key += '{';
      key += hex;
      key += ':';
      key += id.scope();
      key += '}';
    } else {
      key += id.scope();
      key += ':';
      key += hex;
    }
    return key;
  }

  // The channel of the record at `key`: the same suffix under `<prefix>evt:`.
  std::string channel_for(std::string_view key) const {
    return channel_prefix + std::string(key.substr(record_prefix.size()));
  }

  redis_store_options options;
  rd::endpoint where;
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

// ---------------------------------------------------------------------------------------------

redis_store::redis_store(redis_store_options options) {
  validate(options);
  impl_ = std::make_unique<impl>(std::move(options));
}

redis_store::~redis_store() = default;

acquire_result redis_store::try_acquire(const context& ctx) {
  impl& d = *impl_;
  const steady::time_point start = steady::now();
  const std::string key = d.key_of(ctx.id);

  if (d.cache) {
    if (auto hit = d.cache->find(key, start)) {
      d.cache_hits.fetch_add(1, std::memory_order_relaxed);
      if (ctx.fingerprint && !hit->fingerprint.empty() && hit->fingerprint != *ctx.fingerprint) {
        return fingerprint_mismatch{hit->fingerprint, *ctx.fingerprint};
      }
      return duplicate{hit->value, hit->completed_at};
    }
  }

  const lease_token token = lease_token::generate();
  const std::string token_text = token.to_string();
  impl::look look = d.check(ctx, key, token, token_text);
  if (!look.busy || ctx.wait <= milliseconds{0}) return std::move(look.answer);

  // Wait on the record's channel. The first look happened before this waiter watched the channel,
  // so it looks again once the subscription is confirmed (at once if it already was: another
  // waiter's); from then on every completion or release is a message that changes the snapshot.
  // Without a confirmed subscription the waiter re-checks every fallback_recheck. In a cluster
  // the watch is on the master of the record's slot; when a look finds the slot served by another
  // master (a resharding, a failover), or that master drops the subscription, the waiter watches
  // the new owner and confirms its subscription there before it trusts the event again. A
  // subscription lost again and again (masters that disagree about the slot for a moment) is
  // renewed with the growing pause a command makes, bounded by the wait.
  const steady::time_point deadline = saturating_add(start, ctx.wait);
  const impl::target t{"try_acquire", &ctx.id};
  const std::string chan = d.channel_for(key);
  const int slot = d.slot_of(key);
  rd::node* watched = &d.owner_of(t, slot);
  std::optional<rd::subscriber::watch> watch;
  watch.emplace(watched->hub, chan);
  detail::waiter_count::scope counted(d.waiting);
  rd::subscriber::snapshot seen = watch->state();
  bool look_again = seen.confirmed;
  rd::retry_pacing resubscribing(d.options.command_timeout);
  for (;;) {
    if (look_again) {
      look = d.check(ctx, key, token, token_text);
      if (!look.busy) return std::move(look.answer);
      rd::node* owner = &d.owner_of(t, slot);
      if (owner != watched || seen.lost) {
        if (seen.lost) {
          const milliseconds pause = resubscribing.next().value_or(rd::retry_pacing::max_pause);
          std::this_thread::sleep_until(std::min(deadline, saturating_add(steady::now(), pause)));
          const steady::time_point now = steady::now();
          if (now >= deadline) return in_flight{remaining_lease(look.lease_until, now)};
          owner = &d.owner_of(t, slot);
        }
        watched = owner;
        watch.reset();
        watch.emplace(watched->hub, chan);
        seen = watch->state();
        look_again = seen.confirmed;
        if (look_again) continue;  // another waiter's confirmed subscription: look once more
      }
    }
    steady::time_point now = steady::now();
    if (now >= deadline) return in_flight{remaining_lease(look.lease_until, now)};
    steady::time_point wake_at = std::min(deadline, saturating_add(look.lease_until, milliseconds{1}));
    if (!seen.confirmed) wake_at = std::min(wake_at, saturating_add(now, d.options.fallback_recheck));
    // Waiting on the event from here when the look followed a confirmed subscription: every
    // completion from then on is a message this wait sees.
    if (seen.confirmed && look_again) counted.begin();
    watch->wait(seen, wake_at);
    now = steady::now();
    if (now >= deadline) return in_flight{remaining_lease(look.lease_until, now)};
    const rd::subscriber::snapshot previous = seen;
    seen = watch->state();
    if (seen.confirmed) resubscribing.reset();
    // A message is only delivered once published after a subscription existed; if it is the
    // completion by the holder this waiter last saw, it is the record's final state (see
    // from_message), whatever else happened to the subscription meanwhile.
    if (seen.events != previous.events) {
      if (auto answer = impl::from_message(ctx, watch->last_message(), look.holder)) {
        d.message_answers.fetch_add(1, std::memory_order_relaxed);
        return std::move(*answer);
      }
    }
    look_again = true;
  }
}

void redis_store::complete(const identity& id, const lease_token& token, const payload& value, milliseconds ttl) {
  impl& d = *impl_;
  const impl::target t{"complete", &id};
  const std::string key = d.key_of(id);
  const std::string chan = d.channel_for(key);
  const std::string token_text = token.to_string();
  const std::string ttl_ms = impl::decimal_of(capped(ttl));
  const std::string encoded = rd::encode_payload(value);
  const std::array<std::string_view, 1> keys{key};
  const std::string complete_px = impl::decimal_of(capped(ttl) + capped(d.options.retention_grace));
  const std::array<std::string_view, 6> args{token_text, ttl_ms, complete_px, encoded, chan, d.publish};
  const steady::time_point sent_at = steady::now();
  impl::outcome out = d.eval(t, rd::scripts().complete, keys, args, true);
  const redisReply& reply = *out.reply;
  const impl::answer a = impl::read_answer(t, reply);
  if (a.code == "OK") {
    if (d.cache) {
      const auto [completed_at, stored] = impl::split(t, a.rest);
      duplicate done{value, std::chrono::system_clock::time_point(milliseconds(impl::number(t, completed_at)))};
      d.remember(key, done, stored == "-" ? std::string() : std::string(stored), saturating_add(sent_at, capped(ttl)),
                 sent_at);
    }
    d.check_durability(t, out.acknowledged);
    return;
  }
  if (a.code == "MISSING" || a.code == "DONE" || a.code == "STOLEN") impl::lease_lost(t, a.code);
  d.refuse(t, a.code, a.rest);
}

void redis_store::release(const identity& id, const lease_token& token) {
  impl& d = *impl_;
  d.release_record(id, d.key_of(id), token.to_string());
}

bool redis_store::extend(const identity& id, const lease_token& token, milliseconds lease) {
  impl& d = *impl_;
  const impl::target t{"extend", &id};
  const std::string key = d.key_of(id);
  const std::string token_text = token.to_string();
  const std::string lease_ms = impl::decimal_of(capped(lease));
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 3> args{token_text, lease_ms, d.grace};
  impl::outcome out = d.eval(t, rd::scripts().extend, keys, args, true);
  if (impl::read_answer(t, *out.reply).code != "OK") return false;
  d.check_durability(t, out.acknowledged);
  return true;
}

std::size_t redis_store::purge_expired() {
  impl& d = *impl_;
  const impl::target t{"purge_expired", nullptr};
  std::lock_guard lock(d.purge_mutex);
  std::vector<rd::node*> masters;
  try {
    masters = d.topo.masters();
  } catch (const rd::io_failure& e) {
    d.unavailable(t, nullptr, e);
  }
  std::size_t deleted = 0;
  for (rd::node* node : masters) deleted += d.purge_node(t, *node);
  return deleted;
}

std::size_t redis_store::waiting() const noexcept { return impl_->waiting.get(); }

std::string redis_store::record_key(const identity& id) const { return impl_->key_of(id); }

std::string redis_store::channel(const identity& id) const { return impl_->channel_for(impl_->key_of(id)); }

const redis_store_options& redis_store::options() const noexcept { return impl_->options; }

redis_store_statistics redis_store::statistics() const noexcept {
  redis_store_statistics s;
  s.round_trips = impl_->round_trips.load(std::memory_order_relaxed);
  s.script_reloads = impl_->script_reloads.load(std::memory_order_relaxed);
  s.cache_hits = impl_->cache_hits.load(std::memory_order_relaxed);
  s.connections_opened = impl_->topo.connections_opened();
  s.wakeups = impl_->topo.messages();
  s.subscriber_connects = impl_->topo.subscriber_connects();
  s.message_answers = impl_->message_answers.load(std::memory_order_relaxed);
  s.redirections = impl_->redirections.load(std::memory_order_relaxed);
  s.cluster_retries = impl_->cluster_retries.load(std::memory_order_relaxed);
  s.slot_map_refreshes = impl_->topo.refreshes();
  return s;
}

}  // namespace idem
