// runtime/redis/protocol.cpp — redis_store's script calls: where each goes, what its failures
// become, and one state machine that the blocking and the asynchronous entry points both drive.
// What a call sends and how its answer is read: answers.cpp.
#include "store_impl.hpp"

#include <charconv>
#include <utility>

#include <idem/duration.hpp>

#include "../core/blocking_pool.hpp"
#include "../core/caught.hpp"
#include "hash_slot.hpp"

namespace idem {
namespace {

using std::chrono::milliseconds;

// Every node to ask for the slot map: host:port, then the seeds.
std::vector<std::string> cluster_seeds(const redis_store_options& o) {
  std::vector<std::string> seeds{o.host + ":" + std::to_string(o.port)};
  seeds.insert(seeds.end(), o.cluster.seeds.begin(), o.cluster.seeds.end());
  return seeds;
}

rd::topology make_topology(const redis_store_options& o, const rd::endpoint& where, detail::store_loop& loop) {
  if (o.cluster.enabled) return rd::topology(where, cluster_seeds(o), o.pool_size, loop);
  return rd::topology(where, o.pool_size, loop);
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

redis_store::impl::impl(redis_store_options o)
    : options(std::move(o)),
      where{options.host,     options.port,           options.username,       options.password,
            options.database, options.connect_timeout, options.command_timeout},
      loop(options.event_loop),
      topo(make_topology(options, where, loop)),
      publish(options.cluster.enabled ? "SPUBLISH" : "PUBLISH"),
      record_prefix(options.prefix + "rec:"),
      channel_prefix(options.prefix + "evt:"),
      scan_pattern(glob_escape(options.prefix) + "rec:*"),
      grace(decimal_of(capped(options.retention_grace))) {
  if (options.local_cache.max_entries > 0) cache = std::make_unique<rd::completed_cache>(options.local_cache.max_entries);
}

redis_store::impl::~impl() { loop.stop(); }

// --- errors ------------------------------------------------------------------------------------

std::string redis_store::impl::server(const rd::node* n) const {
  if (n != nullptr) return "Redis at " + n->address;
  return "the Redis Cluster at " + where.describe();
}

void redis_store::impl::unavailable(const target& t, const rd::node* n, const rd::io_failure& e) const {
  if (!e.outcome_unknown()) unavailable(t, n, std::string_view(e.what()));
  throw outcome_unknown_error("redis_store: cannot " + std::string(t.operation) + t.describe() + ": " + server(n) +
                                  " is unavailable: " + std::string(e.what()) +
                                  "; the command was sent and not answered, whether it took effect is unknown",
                              std::string(t.operation), t.record());
}

void redis_store::impl::unavailable(const target& t, const rd::node* n, std::string_view reason) const {
  throw store_unavailable_error("redis_store: cannot " + std::string(t.operation) + t.describe() + ": " + server(n) +
                                    " is unavailable: " + std::string(reason),
                                std::string(t.operation), t.record());
}

void redis_store::impl::unexpected(const target& t) {
  throw corrupt_record_error("redis_store: cannot " + std::string(t.operation) + t.describe() +
                                 ": unexpected reply from the script (is another version of idem sharing the prefix?)",
                             std::string(t.operation), t.record());
}

void redis_store::impl::refuse(const target& t, std::string_view code, std::string_view detail) const {
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

void redis_store::impl::lease_lost(const target& t, std::string_view code) {
  const std::string head = "redis_store: cannot " + std::string(t.operation) + t.describe() + ": ";
  const char* why = code == "MISSING" ? "no record is held under this lease (it is absent or expired)"
                    : code == "DONE"  ? "the record is already complete, so this lease no longer holds it"
                                      : "the lease no longer owns the record (it expired and another caller took it over)";
  throw lease_lost_error(head + why, std::string(t.operation), t.record());
}

void redis_store::impl::check_durability(const target& t, long long acknowledged) const {
  if (acknowledged < 0 || acknowledged >= options.replica_ack.replicas) return;
  throw durability_error("redis_store: Redis accepted the " + std::string(t.operation) + " of" + t.describe() +
                             ", but only " + std::to_string(acknowledged) + " of the " +
                             std::to_string(options.replica_ack.replicas) + " required replicas acknowledged it within " +
                             format_duration(options.replica_ack.timeout),
                         std::string(t.operation), t.record());
}

// --- routing -----------------------------------------------------------------------------------

rd::node& redis_store::impl::owner_of(const target& t, int slot) {
  try {
    return topo.owner(slot);
  } catch (const rd::io_failure& e) {
    unavailable(t, nullptr, e);
  }
}

// `<prefix>rec:<scope>:<hex>`; in a cluster `<prefix>rec:{<hex>:<scope>}`: the record's own hash
// tag, digest first so that a '}' in the scope still leaves the digest in the tag.
std::string redis_store::impl::key_of(const identity& id) const {
  const auto digest = id.key_digest();
  std::string key;
  key.reserve(record_prefix.size() + id.scope().size() + 3 + 2 * digest.size());
  key += record_prefix;
  if (topo.cluster()) {
    key += '{';
    append_hex(key, digest.data(), digest.size());
    key += ':';
    key += id.scope();
    key += '}';
  } else {
    key += id.scope();
    key += ':';
    append_hex(key, digest.data(), digest.size());
  }
  return key;
}

std::optional<std::pair<std::string, std::array<unsigned char, 32>>> redis_store::impl::identity_of(
    std::string_view key) const {
  if (!key.starts_with(record_prefix)) return std::nullopt;
  std::string_view rest = key.substr(record_prefix.size());
  std::string_view scope, hex;
  if (topo.cluster()) {
    if (rest.size() < 2 || rest.front() != '{' || rest.back() != '}') return std::nullopt;
    rest = rest.substr(1, rest.size() - 2);
    const std::size_t colon = rest.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    hex = rest.substr(0, colon);
    scope = rest.substr(colon + 1);
  } else {
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    scope = rest.substr(0, colon);
    hex = rest.substr(colon + 1);
  }
  std::array<unsigned char, 32> digest{};
  if (hex.size() != 2 * digest.size() || scope.empty()) return std::nullopt;
  for (std::size_t i = 0; i < digest.size(); ++i) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, value, 16);
    if (ec != std::errc() || end != hex.data() + 2 * i + 2) return std::nullopt;
    digest[i] = static_cast<unsigned char>(value);
  }
  return std::make_pair(std::string(scope), digest);
}

std::string redis_store::impl::channel_for(std::string_view key) const {
  return channel_prefix + std::string(key.substr(record_prefix.size()));
}

// --- script calls ------------------------------------------------------------------------------

redis_store::impl::script_call::script_call(const impl& d, target target_of, const rd::script& script,
                                            std::span<const std::string_view> k, std::span<const std::string_view> a,
                                            bool wait_for_replicas)
    : t(target_of), s(script), keys(k), args(a), with_wait(wait_for_replicas && d.options.replica_ack.replicas > 0),
      slot(d.slot_of(k.empty() ? std::string_view() : k[0])), numkeys(static_cast<std::int64_t>(k.size())),
      replicas(d.options.replica_ack.replicas), wait_ms(d.options.replica_ack.timeout.count()),
      pacing(d.options.command_timeout) {}

void redis_store::impl::prepare(script_call& c) const {
  for (rd::command& cmd : c.commands) cmd.clear();
  c.replies = {};
  std::size_t n = 0;
  if (c.asking) (c.commands[n++] = rd::command(1)).arg("ASKING");
  c.script_at = n;
  rd::command& cmd = c.commands[n++];
  cmd.reserve(3 + c.keys.size() + c.args.size());
  if (c.use_eval) {
    cmd.arg("EVAL").arg(c.s.source);
  } else {
    cmd.arg("EVALSHA").arg(c.s.sha);
  }
  cmd.arg(c.numkeys.view());
  for (std::string_view k : c.keys) cmd.arg(k);
  for (std::string_view a : c.args) cmd.arg(a);
  if (c.with_wait) (c.commands[n++] = rd::command(3)).arg("WAIT").arg(c.replicas.view()).arg(c.wait_ms.view());
  c.count = n;
}

bool redis_store::impl::settles_at_once(const script_call& c, const rd::io_failure* failure) const noexcept {
  if (!topo.cluster()) return true;
  if (failure != nullptr) return false;
  const rd::reply_ptr& reply = c.replies[c.script_at];
  return reply->type != REDIS_REPLY_ERROR || rd::text(reply.get()).starts_with("NOSCRIPT");
}

void redis_store::impl::after_failure(script_call& c, const rd::io_failure& e) {
  rd::topology::note_failure(*c.node);
  rd::node* const failed = c.node;
  if (topo.cluster()) {
    // The node may be gone and its slots served by a promoted replica: ask the cluster, so that
    // this call (when nothing was sent, once) or at least the next one goes there.
    try {
      topo.refresh();
      c.node = &topo.owner(c.slot);
    } catch (const rd::io_failure&) {
    }
    if (!e.outcome_unknown() && !c.rerouted && c.node != failed) {
      c.rerouted = true;
      c.asking = false;
      return;
    }
  }
  unavailable(c.t, failed, e);
}

bool redis_store::impl::after_reply(script_call& c) {
  round_trips.fetch_add(1, std::memory_order_relaxed);
  const rd::reply_ptr& reply = c.replies[c.script_at];
  if (reply->type != REDIS_REPLY_ERROR) return true;
  const std::string_view message = rd::text(reply.get());
  if (!c.use_eval && message.starts_with("NOSCRIPT")) {
    script_reloads.fetch_add(1, std::memory_order_relaxed);
    c.use_eval = true;
    return false;
  }
  if (topo.cluster()) {
    const bool moved = message.starts_with("MOVED ");
    if (moved || message.starts_with("ASK ")) {
      // "MOVED <slot> <host:port>" / "ASK <slot> <host:port>"
      const std::string_view address = message.substr(message.rfind(' ') + 1);
      redirections.fetch_add(1, std::memory_order_relaxed);
      if (++c.redirected > stable_redirections) {
        // The masters disagree about who serves the slot: wait for them to agree.
        if (!c.pacing.pause()) {
          unavailable(c.t, c.node, "the cluster kept redirecting for " + format_duration(options.command_timeout) +
                                       " (last: " + std::string(message) + ")");
        }
        cluster_retries.fetch_add(1, std::memory_order_relaxed);
      }
      try {
        c.node = moved ? &topo.moved(c.slot, address, *c.node) : &topo.at(address, *c.node);
      } catch (const rd::io_failure& e) {
        unavailable(c.t, c.node, e);
      }
      c.asking = !moved;
      return false;
    }
    const bool down = message.starts_with("CLUSTERDOWN");
    if (down || message.starts_with("TRYAGAIN")) {
      if (!c.pacing.pause()) {
        unavailable(c.t, c.node, "the cluster kept answering " + std::string(message.substr(0, message.find(' '))) +
                                     " for " + format_duration(options.command_timeout));
      }
      cluster_retries.fetch_add(1, std::memory_order_relaxed);
      if (down) {
        try {
          topo.refresh();
          c.node = &topo.owner(c.slot);
        } catch (const rd::io_failure&) {
        }
      }
      return false;
    }
  }
  unavailable(c.t, c.node, "the " + std::string(c.s.name) + " script failed: " + std::string(message));
}

redis_store::impl::outcome redis_store::impl::result(script_call& c) const {
  outcome out{std::move(c.replies[c.script_at])};
  if (c.with_wait) {
    const rd::reply_ptr& acknowledged = c.replies[c.script_at + 1];
    if (acknowledged->type != REDIS_REPLY_INTEGER) {
      unavailable(c.t, c.node, "WAIT failed: " + std::string(rd::text(acknowledged.get())));
    }
    out.acknowledged = acknowledged->integer;
  }
  return out;
}

redis_store::impl::outcome redis_store::impl::run_blocking(script_call& c) {
  if (c.node == nullptr) c.node = &owner_of(c.t, c.slot);
  for (;;) {
    prepare(c);
    try {
      auto conn = c.node->pool.take();
      conn->exchange(std::span(c.commands.data(), c.count), std::span(c.replies.data(), c.count), c.with_wait);
    } catch (const rd::io_failure& e) {
      after_failure(c, e);
      continue;
    }
    if (after_reply(c)) return result(c);
  }
}

void redis_store::impl::run_async(script_call& c, outcome_handler done) {
  if (c.node == nullptr) c.node = topo.known_owner(c.slot);
  if (c.node == nullptr) {  // a slot map to load first
    continue_blocking(c, std::move(done), [] { return false; });
    return;
  }
  // The common case, a connection open already: sent at once, with no handler to wait for one.
  if (std::shared_ptr<rd::multiplexed_connection> conn = c.node->pool.take_open()) {
    send_async(c, *conn, std::move(done));
    return;
  }
  c.node->pool.async_take([this, &c, done = std::move(done)](std::shared_ptr<rd::multiplexed_connection> conn,
                                                             const rd::io_failure* not_opened) mutable {
    if (conn == nullptr) {
      answered(c, not_opened, std::move(done));
      return;
    }
    send_async(c, *conn, std::move(done));
  });
}

void redis_store::impl::send_async(script_call& c, rd::multiplexed_connection& conn, outcome_handler done) {
  prepare(c);
  c.pending_handler = std::move(done);
  conn.async_exchange(std::span(c.commands.data(), c.count), std::span(c.replies.data(), c.count), c.with_wait,
                      [this, &c](const rd::io_failure* failure, std::span<rd::reply_ptr>) {
                        answered(c, failure, std::move(c.pending_handler));  // called once; `c` may send again
                      });
}

void redis_store::impl::answered(script_call& c, const rd::io_failure* failure, outcome_handler done) {
  if (!settles_at_once(c, failure)) {
    if (failure != nullptr) {
      continue_blocking(c, std::move(done), [this, &c, copy = *failure] {
        after_failure(c, copy);
        return false;
      });
    } else {
      continue_blocking(c, std::move(done), [this, &c] { return after_reply(c); });
    }
    return;
  }
  outcome out;
  bool again = false;
  if (std::exception_ptr error = detail::caught([&] {
        if (failure != nullptr) {
          after_failure(c, *failure);  // a single server's failure: throws
        } else if (!after_reply(c)) {
          again = true;  // NOSCRIPT: once more with EVAL
        } else {
          out = result(c);
        }
      })) {
    done(std::move(error), outcome{});
    return;
  }
  if (again) return run_async(c, std::move(done));
  done(nullptr, std::move(out));
}

void redis_store::impl::continue_blocking(script_call& c, outcome_handler done, std::function<bool()> step) {
  detail::blocking_pool::shared().post([this, &c, done = std::move(done), step = std::move(step)] {
    outcome out;
    std::exception_ptr error = detail::caught([&] { out = step() ? result(c) : run_blocking(c); });
    done(std::move(error), std::move(out));
  });
}

long long redis_store::impl::wait_for_replicas(const target& t, std::string_view key) {
  return wait_for_replicas(t, owner_of(t, slot_of(key)));
}

long long redis_store::impl::wait_for_replicas(const target& t, rd::node& node) {
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

}  // namespace idem
