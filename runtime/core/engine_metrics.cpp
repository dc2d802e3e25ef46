// runtime/core/engine_metrics.cpp — an engine's reports to idem::metrics.
#include "engine_metrics.hpp"

#include <idem/errors.hpp>

#include <optional>
#include <utility>

namespace idem::detail {

namespace {

using clock = std::chrono::steady_clock;

// Whether `error`, thrown by a store operation, means the store failed. A lease found lost is the
// fencing working, a cancelled wait the caller's choice.
bool is_store_failure(std::exception_ptr error) {
  try {
    std::rethrow_exception(std::move(error));
  } catch (const lease_lost_error&) {
    return false;
  } catch (const operation_cancelled&) {
    return false;
  } catch (...) {
    return true;
  }
}

// Observes the time from its construction to its destruction, when given a histogram.
class stopwatch {
 public:
  explicit stopwatch(duration_histogram* histogram) : histogram_(histogram) {
    if (histogram_ != nullptr) start_ = clock::now();
  }
  ~stopwatch() {
    if (histogram_ != nullptr) histogram_->observe(clock::now() - start_);
  }
  stopwatch(const stopwatch&) = delete;
  stopwatch& operator=(const stopwatch&) = delete;

 private:
  duration_histogram* histogram_;
  clock::time_point start_{};
};

}  // namespace

// The listener ----------------------------------------------------------------------------------

metrics_listener::metrics_listener(std::shared_ptr<metrics> target)
    : target_(std::move(target)), registry_(registry_of(*target_)) {}

void metrics_listener::on_acquired(const context& ctx, const lease_token&) {
  registry_.scope(ctx.id.scope()).acquired.fetch_add(1, std::memory_order_relaxed);
}

void metrics_listener::on_completed(const context& ctx, const lease_token&, const payload&) {
  registry_.scope(ctx.id.scope()).executed.fetch_add(1, std::memory_order_relaxed);
}

void metrics_listener::on_failed(const context& ctx, const lease_token&, std::exception_ptr cause, failure_phase) {
  scope_series& series = registry_.scope(ctx.id.scope());
  series.failed.fetch_add(1, std::memory_order_relaxed);
  try {
    if (cause) std::rethrow_exception(cause);
  } catch (const lease_lost_error&) {
    series.leases_lost.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
  }
}

void metrics_listener::on_duplicate(const context& ctx, const payload&, std::chrono::system_clock::time_point) {
  registry_.scope(ctx.id.scope()).replayed.fetch_add(1, std::memory_order_relaxed);
}

void metrics_listener::on_in_flight(const context& ctx, std::chrono::milliseconds) {
  registry_.scope(ctx.id.scope()).in_flight.fetch_add(1, std::memory_order_relaxed);
}

void metrics_listener::on_lease_taken_over(const context& ctx, const lease_token&) {
  registry_.scope(ctx.id.scope()).lease_steals.fetch_add(1, std::memory_order_relaxed);
}

void metrics_listener::on_fingerprint_mismatch(const context& ctx) {
  registry_.scope(ctx.id.scope()).fingerprint_mismatches.fetch_add(1, std::memory_order_relaxed);
}

// The store ------------------------------------------------------------------------------------

measured_store::measured_store(store& backing, std::shared_ptr<metrics> target)
    : backing_(backing),
      target_(std::move(target)),
      registry_(registry_of(*target_)),
      series_(registry_.store(backing_.name(), !backing_.in_process())) {}

template <class Call>
decltype(auto) measured_store::measure(store_operation op, Call&& call) {
  const stopwatch timing(series_.timed ? series_.latency[static_cast<std::size_t>(op)].get() : nullptr);
  try {
    return call();
  } catch (...) {
    if (is_store_failure(std::current_exception()))
      series_.errors[static_cast<std::size_t>(op)].fetch_add(1, std::memory_order_relaxed);
    throw;
  }
}

async_done measured_store::measured(store_operation op, async_done done) {
  return [this, op, start = clock::now(), done = std::move(done)](std::exception_ptr error) {
    series_.latency[static_cast<std::size_t>(op)]->observe(clock::now() - start);
    if (error && is_store_failure(error))
      series_.errors[static_cast<std::size_t>(op)].fetch_add(1, std::memory_order_relaxed);
    done(std::move(error));
  };
}

std::optional<acquire_result> measured_store::try_acquire_at_once(const context& ctx) {
  if (!series_.timed) return backing_.try_acquire_at_once(ctx);
  return std::nullopt;
}

acquire_result measured_store::try_acquire(const context& ctx) {
  if (!series_.timed) return backing_.try_acquire(ctx);
  duration_histogram& latency = *series_.latency[static_cast<std::size_t>(store_operation::acquire)];
  const clock::time_point start = clock::now();
  std::optional<acquire_result> answer;
  try {
    answer.emplace(backing_.try_acquire(ctx));
  } catch (...) {
    latency.observe(clock::now() - start);
    if (is_store_failure(std::current_exception()))
      series_.errors[static_cast<std::size_t>(store_operation::acquire)].fetch_add(1, std::memory_order_relaxed);
    throw;
  }
  const clock::duration elapsed = clock::now() - start;
  latency.observe(elapsed);
  if (!std::holds_alternative<acquired>(*answer)) answered(registry_.scope(ctx.id.scope()), *answer, elapsed);
  return std::move(*answer);
}

void measured_store::answered(scope_series& scope, const acquire_result& answer, clock::duration elapsed) {
  scope.wait.observe(elapsed);
  if (const auto* replay = std::get_if<duplicate>(&answer); replay != nullptr && replay->from_cache)
    series_.cache_hits.fetch_add(1, std::memory_order_relaxed);
}

void measured_store::complete(const identity& id, const lease_token& token, const payload& value,
                              std::chrono::milliseconds ttl) {
  if (!series_.timed) return backing_.complete(id, token, value, ttl);
  measure(store_operation::complete, [&] { backing_.complete(id, token, value, ttl); });
}

void measured_store::release(const identity& id, const lease_token& token) {
  if (!series_.timed) return backing_.release(id, token);
  measure(store_operation::release, [&] { backing_.release(id, token); });
}

bool measured_store::extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) {
  // Only the heartbeat extends a lease this way.
  series_.heartbeat_extends.fetch_add(1, std::memory_order_relaxed);
  bool extended = false;
  try {
    extended = measure(store_operation::extend, [&] { return backing_.extend(id, token, lease); });
  } catch (...) {
    series_.heartbeat_errors.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
  if (!extended) series_.heartbeat_lost.fetch_add(1, std::memory_order_relaxed);
  return extended;
}

bool measured_store::extend_in_transaction(const identity& id, const lease_token& token,
                                           std::chrono::milliseconds lease, transaction& tx) {
  return measure(store_operation::extend_in_transaction,
                 [&] { return backing_.extend_in_transaction(id, token, lease, tx); });
}

std::size_t measured_store::purge_expired() {
  const std::size_t deleted = measure(store_operation::purge, [&] { return backing_.purge_expired(); });
  series_.purges.fetch_add(1, std::memory_order_relaxed);
  series_.purged_records.fetch_add(deleted, std::memory_order_relaxed);
  return deleted;
}

std::size_t measured_store::waiting() const noexcept { return backing_.waiting(); }

bool measured_store::supports_transactional_completion() const noexcept {
  return backing_.supports_transactional_completion();
}

std::string measured_store::join_problem(const transaction& tx) const { return backing_.join_problem(tx); }

void measured_store::complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                                             std::chrono::milliseconds ttl, transaction& tx) {
  measure(store_operation::complete_in_transaction,
          [&] { backing_.complete_in_transaction(id, token, value, ttl, tx); });
}

std::string_view measured_store::name() const noexcept { return backing_.name(); }

bool measured_store::in_process() const noexcept { return backing_.in_process(); }

void measured_store::async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) {
  if (!series_.timed) return backing_.async_try_acquire(ctx, cancel, std::move(done));
  scope_series* scope = &registry_.scope(ctx.id.scope());
  backing_.async_try_acquire(
      ctx, cancel,
      [this, scope, start = clock::now(), done = std::move(done)](std::exception_ptr error, acquire_result answer) {
        const clock::duration elapsed = clock::now() - start;
        series_.latency[static_cast<std::size_t>(store_operation::acquire)]->observe(elapsed);
        if (error) {
          if (is_store_failure(error))
            series_.errors[static_cast<std::size_t>(store_operation::acquire)].fetch_add(1, std::memory_order_relaxed);
        } else if (!std::holds_alternative<acquired>(answer)) {
          answered(*scope, answer, elapsed);
        }
        done(std::move(error), std::move(answer));
      });
}

void measured_store::async_complete(const identity& id, const lease_token& token, const payload& value,
                                    std::chrono::milliseconds ttl, async_done done) {
  if (!series_.timed) return backing_.async_complete(id, token, value, ttl, std::move(done));
  backing_.async_complete(id, token, value, ttl, measured(store_operation::complete, std::move(done)));
}

void measured_store::async_release(const identity& id, const lease_token& token, async_done done) {
  if (!series_.timed) return backing_.async_release(id, token, std::move(done));
  backing_.async_release(id, token, measured(store_operation::release, std::move(done)));
}

void measured_store::async_join_problem(const transaction& tx, async_handler<std::string> done) const {
  backing_.async_join_problem(tx, std::move(done));
}

void measured_store::async_complete_in_transaction(const identity& id, const lease_token& token,
                                                   const payload& value, std::chrono::milliseconds ttl,
                                                   transaction& tx, async_done done) {
  if (!series_.timed) return backing_.async_complete_in_transaction(id, token, value, ttl, tx, std::move(done));
  backing_.async_complete_in_transaction(id, token, value, ttl, tx,
                                         measured(store_operation::complete_in_transaction, std::move(done)));
}

}  // namespace idem::detail
