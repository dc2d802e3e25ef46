// runtime/redis/redis_store.cpp — idem::redis_store: configuration and the blocking entry points.
// The protocol is in protocol.cpp, the wait in record_wait.cpp, the asynchronous entry points in
// async_calls.cpp and the purge in purge.cpp.
#include <idem/redis_store.hpp>

#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>

#include <idem/duration.hpp>
#include <idem/errors.hpp>

#include "record_wait.hpp"
#include "store_impl.hpp"
#include "topology.hpp"

namespace idem {
namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

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

}  // namespace

redis_store::redis_store(redis_store_options options) {
  validate(options);
  impl_ = std::make_unique<impl>(std::move(options));
}

redis_store::~redis_store() = default;

acquire_result redis_store::try_acquire(const context& ctx) {
  impl& d = *impl_;
  const steady::time_point start = steady::now();
  std::string key = d.key_of(ctx.id);
  if (auto hit = d.cached(ctx, key, start)) return std::move(*hit);
  const impl::acquire_request request(d, ctx, std::move(key));
  impl::look look = d.check(ctx, request);
  if (!look.busy || ctx.wait <= milliseconds{0}) return std::move(look.answer);

  using wait = impl::record_wait;
  wait w(d, ctx, request.key, std::move(look), saturating_add(start, ctx.wait));
  wait::step next = w.start();
  for (;;) {
    if (auto* done = std::get_if<wait::answer>(&next)) return std::move(done->result);
    if (std::holds_alternative<wait::look_request>(next)) {
      next = w.looked(d.check(ctx, request));
    } else if (auto* pause = std::get_if<wait::pause_request>(&next)) {
      std::this_thread::sleep_until(pause->until);
      next = w.paused();
    } else {
      w.watch().wait(w.seen(), std::get<wait::wait_request>(next).until);
      next = w.woken();
    }
  }
}

void redis_store::complete(const identity& id, const lease_token& token, const payload& value, milliseconds ttl) {
  impl& d = *impl_;
  const impl::target t{"complete", &id};
  const impl::complete_request request(d, id, token, value, ttl);
  const steady::time_point sent_at = steady::now();
  d.read_complete(t, request, &value, ttl, d.eval(t, rd::scripts().complete, request.keys, request.args, true), sent_at);
}

void redis_store::release(const identity& id, const lease_token& token) {
  impl& d = *impl_;
  d.release_record(id, d.key_of(id), token.to_string());
}

bool redis_store::extend(const identity& id, const lease_token& token, milliseconds lease) {
  impl& d = *impl_;
  const impl::target t{"extend", &id};
  const std::string key = d.key_of(id);
  const std::array<char, 32> token_hex = token.hex();
  const std::string_view token_text(token_hex.data(), token_hex.size());
  const std::string lease_ms = impl::decimal_of(capped(lease));
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 3> args{token_text, lease_ms, d.grace};
  impl::outcome out = d.eval(t, rd::scripts().extend, keys, args, true);
  if (impl::read_answer(t, *out.reply).code != "OK") return false;
  d.check_durability(t, out.acknowledged);
  return true;
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
