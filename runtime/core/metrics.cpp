// runtime/core/metrics.cpp — idem::metrics: the registry of series and its exposition.
#include <idem/errors.hpp>
#include <idem/metrics.hpp>

#include <algorithm>

#include "metrics_registry.hpp"
#include "prometheus_text.hpp"

namespace idem {

namespace detail {

namespace {

// A duplicate answered at once takes a store round trip; one that waited, up to its waitTimeout
// (10 s by default, minutes at most in practice).
constexpr double wait_bounds[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
// From a local SQLite write (tens of microseconds) to a store at its timeout (seconds).
constexpr double store_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                   0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};

constexpr std::string_view overflow_scope = "~other";

std::atomic<std::uint64_t> next_registry_id{1};

// The scope a thread asked a registry for last, so that a thread calling one function over and
// over finds its series without the registry's lock.
struct last_scope {
  std::uint64_t registry = 0;
  std::string name;
  scope_series* series = nullptr;
};
thread_local last_scope last;

}  // namespace

duration_histogram::duration_histogram(std::span<const double> bounds_seconds)
    : bounds_(bounds_seconds), buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_seconds.size() + 1)) {
  bounds_ns_.reserve(bounds_.size());
  for (const double bound : bounds_) bounds_ns_.push_back(static_cast<std::int64_t>(bound * 1e9));
}

void duration_histogram::observe(std::chrono::nanoseconds elapsed) noexcept {
  const std::int64_t ns = std::max<std::int64_t>(elapsed.count(), 0);
  const std::size_t bucket = static_cast<std::size_t>(
      std::lower_bound(bounds_ns_.begin(), bounds_ns_.end(), ns) - bounds_ns_.begin());  // le: bound >= ns
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
}

duration_histogram::reading duration_histogram::read() const {
  reading r;
  r.cumulative.reserve(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    r.cumulative.push_back(running);
  }
  r.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return r;
}

scope_series::scope_series() : wait(wait_bounds) {}

std::string_view label_of(store_operation op) noexcept {
  switch (op) {
    case store_operation::acquire: return "acquire";
    case store_operation::complete: return "complete";
    case store_operation::release: return "release";
    case store_operation::extend: return "extend";
    case store_operation::complete_in_transaction: return "complete_in_transaction";
    case store_operation::extend_in_transaction: return "extend_in_transaction";
    case store_operation::purge: return "purge";
  }
  return "unknown";
}

store_series::store_series(bool is_timed) : timed(is_timed) {
  if (timed)
    for (auto& histogram : latency) histogram = std::make_unique<duration_histogram>(store_bounds);
}

metrics_registry::metrics_registry(const metrics_options& options)
    : id_(next_registry_id.fetch_add(1, std::memory_order_relaxed)), max_scopes_(options.max_scopes) {
  if (max_scopes_ == 0) throw configuration_error("metrics_options.max_scopes must be at least 1");
}

scope_series& metrics_registry::scope(std::string_view scope) {
  if (last.registry == id_ && last.name == scope) return *last.series;
  scope_series* found = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = scopes_.find(scope);
    if (it == scopes_.end()) {
      const std::string_view key = scopes_.size() < max_scopes_ ? scope : overflow_scope;
      it = scopes_.find(key);
      if (it == scopes_.end()) it = scopes_.emplace(std::string(key), std::make_unique<scope_series>()).first;
    }
    found = it->second.get();
  }
  last.registry = id_;
  last.name.assign(scope);
  last.series = found;
  return *found;
}

store_series& metrics_registry::store(std::string_view name, bool timed) {
  std::lock_guard lock(mutex_);
  auto it = stores_.find(name);
  if (it == stores_.end()) it = stores_.emplace(std::string(name), std::make_unique<store_series>(timed)).first;
  return *it->second;
}

namespace {

std::uint64_t value(const std::atomic<std::uint64_t>& counter) { return counter.load(std::memory_order_relaxed); }

void write_histogram(exposition_writer& out, std::string_view name, std::initializer_list<metric_label> labels,
                     const duration_histogram& histogram) {
  const duration_histogram::reading r = histogram.read();
  out.histogram(name, labels, histogram.bounds(), r.cumulative, r.sum_seconds);
}

}  // namespace

std::string metrics_registry::render() const {
  std::lock_guard lock(mutex_);
  exposition_writer out;
  if (!scopes_.empty()) {
    out.family("idem_calls_total", "counter",
               "Guarded calls by how they ended: executed (ran and recorded), replayed (an earlier result), "
               "in_flight (held by another caller beyond the wait), failed (ran without a recorded result).");
    for (const auto& [scope, s] : scopes_) {
      out.sample("idem_calls_total", {{"scope", scope}, {"outcome", "executed"}}, value(s->executed));
      out.sample("idem_calls_total", {{"scope", scope}, {"outcome", "replayed"}}, value(s->replayed));
      out.sample("idem_calls_total", {{"scope", scope}, {"outcome", "in_flight"}}, value(s->in_flight));
      out.sample("idem_calls_total", {{"scope", scope}, {"outcome", "failed"}}, value(s->failed));
    }
    out.family("idem_calls_in_progress", "gauge", "Calls holding their record's lease right now.");
    for (const auto& [scope, s] : scopes_) {
      // Terminals first: read before the acquisitions, they cannot outnumber them (but for memory
      // ordering on the relaxed counters, which the clamp covers).
      const std::uint64_t ended = value(s->executed) + value(s->failed);
      const std::uint64_t acquired = value(s->acquired);
      out.sample("idem_calls_in_progress", {{"scope", scope}}, acquired > ended ? acquired - ended : 0);
    }
    out.family("idem_leases_lost_total", "counter",
               "Holders whose lease expired and was taken over before they recorded their result (the action may "
               "have run twice).");
    for (const auto& [scope, s] : scopes_)
      out.sample("idem_leases_lost_total", {{"scope", scope}}, value(s->leases_lost));
    out.family("idem_lease_steals_total", "counter",
               "Records in progress under a lapsed lease that a caller took over: their holder crashed or stalled "
               "past its lease, and its action may have run in part.");
    for (const auto& [scope, s] : scopes_)
      out.sample("idem_lease_steals_total", {{"scope", scope}}, value(s->lease_steals));
    out.family("idem_fingerprint_mismatches_total", "counter",
               "Calls refused because their record was completed by a request with a different fingerprint (the "
               "same key reused for another request).");
    for (const auto& [scope, s] : scopes_)
      out.sample("idem_fingerprint_mismatches_total", {{"scope", scope}}, value(s->fingerprint_mismatches));
    out.family("idem_wait_seconds", "histogram",
               "How long a call that did not acquire its record (replayed, in flight, or refused for a fingerprint "
               "mismatch) spent in the store, waiting for the holder included. Not measured on in-process stores.");
    for (const auto& [scope, s] : scopes_) write_histogram(out, "idem_wait_seconds", {{"scope", scope}}, s->wait);
  }
  if (!stores_.empty()) {
    bool any_timed = false;
    for (const auto& entry : stores_) any_timed = any_timed || entry.second->timed;
    if (any_timed) {
      out.family("idem_store_operation_seconds", "histogram",
                 "Duration of the store operations engines made, failed ones included. Not measured on in-process "
                 "stores.");
      for (const auto& [store, s] : stores_)
        if (s->timed)
          for (std::size_t op = 0; op < store_operation_count; ++op)
            write_histogram(out, "idem_store_operation_seconds",
                            {{"store", store}, {"operation", label_of(static_cast<store_operation>(op))}},
                            *s->latency[op]);
    }
    out.family("idem_store_errors_total", "counter",
               "Store operations that failed (the store unreachable, a timeout, a refused record); a lease found "
               "lost is not an error.");
    for (const auto& [store, s] : stores_)
      for (std::size_t op = 0; op < store_operation_count; ++op)
        out.sample("idem_store_errors_total",
                   {{"store", store}, {"operation", label_of(static_cast<store_operation>(op))}}, value(s->errors[op]));
    out.family("idem_heartbeat_extends_total", "counter", "Lease extensions the heartbeat attempted.");
    for (const auto& [store, s] : stores_)
      out.sample("idem_heartbeat_extends_total", {{"store", store}}, value(s->heartbeat_extends));
    out.family("idem_heartbeat_failures_total", "counter",
               "Lease extensions that did not extend: lease_lost (the record was no longer held under the lease) or "
               "error (the store failed; the heartbeat tries again sooner).");
    for (const auto& [store, s] : stores_) {
      out.sample("idem_heartbeat_failures_total", {{"store", store}, {"reason", "lease_lost"}},
                 value(s->heartbeat_lost));
      out.sample("idem_heartbeat_failures_total", {{"store", store}, {"reason", "error"}},
                 value(s->heartbeat_errors));
    }
    out.family("idem_purges_total", "counter", "Scheduled purges of expired records that completed.");
    for (const auto& [store, s] : stores_) out.sample("idem_purges_total", {{"store", store}}, value(s->purges));
    out.family("idem_purged_records_total", "counter", "Expired records the scheduled purges deleted.");
    for (const auto& [store, s] : stores_)
      out.sample("idem_purged_records_total", {{"store", store}}, value(s->purged_records));
    out.family("idem_cache_hits_total", "counter",
               "Replays a store answered from its own in-process copy of completed records, without reaching its "
               "backend (the Redis store's local_cache).");
    for (const auto& [store, s] : stores_)
      out.sample("idem_cache_hits_total", {{"store", store}}, value(s->cache_hits));
  }
  return std::move(out).take();
}

metrics_registry& registry_of(metrics& m) noexcept { return *m.registry_; }

}  // namespace detail

metrics::metrics(metrics_options options) : registry_(std::make_unique<detail::metrics_registry>(options)) {}

metrics::~metrics() = default;

std::string metrics::render() const { return registry_->render(); }

}  // namespace idem
