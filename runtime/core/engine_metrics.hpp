// runtime/core/engine_metrics.hpp — how an engine reports to idem::metrics: a lifecycle listener
// counts the calls, a store decorator times and counts the store operations (what listeners do
// not see: the store's latency and failures, waits, heartbeat extends, purges).
#pragma once

#include <memory>

#include <idem/listener.hpp>
#include <idem/metrics.hpp>
#include <idem/store.hpp>

#include "metrics_registry.hpp"

namespace idem::detail {

// Counts every call's outcome under its scope. Registered first among an engine's listeners.
class metrics_listener final : public lifecycle_listener {
 public:
  explicit metrics_listener(std::shared_ptr<metrics> target);

  void on_acquired(const context& ctx, const lease_token&) override;
  void on_completed(const context& ctx, const lease_token&, const payload&) override;
  void on_failed(const context& ctx, const lease_token&, std::exception_ptr cause, failure_phase) override;
  void on_duplicate(const context& ctx, const payload&, std::chrono::system_clock::time_point) override;
  void on_in_flight(const context& ctx, std::chrono::milliseconds) override;
  void on_lease_taken_over(const context& ctx, const lease_token&) override;
  void on_fingerprint_mismatch(const context& ctx) override;

 private:
  std::shared_ptr<metrics> target_;  // keeps the registry alive
  metrics_registry& registry_;
};

// The store an engine with metrics calls instead of its backing store: every member forwards,
// and the engine's operations are timed and their failures counted (a lease found lost and a
// cancelled wait are not failures). A store that reports in_process() is neither timed nor
// counted per operation; its heartbeat extends and purges are. Must outlive the operations it
// starts, as the backing store must.
class measured_store final : public store {
 public:
  measured_store(store& backing, std::shared_ptr<metrics> target);

  [[nodiscard]] acquire_result try_acquire(const context& ctx) override;
  // The backing store's when it is not timed; a timed store's claims take the measured paths.
  [[nodiscard]] std::optional<acquire_result> try_acquire_at_once(const context& ctx) override;
  void complete(const identity& id, const lease_token& token, const payload& value,
                std::chrono::milliseconds ttl) override;
  void release(const identity& id, const lease_token& token) override;
  [[nodiscard]] bool extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) override;
  [[nodiscard]] bool extend_in_transaction(const identity& id, const lease_token& token,
                                           std::chrono::milliseconds lease, transaction& tx) override;
  std::size_t purge_expired() override;
  std::size_t waiting() const noexcept override;
  bool supports_transactional_completion() const noexcept override;
  [[nodiscard]] std::string join_problem(const transaction& tx) const override;
  void complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                               std::chrono::milliseconds ttl, transaction& tx) override;
  std::string_view name() const noexcept override;
  bool in_process() const noexcept override;

  void async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) override;
  void async_complete(const identity& id, const lease_token& token, const payload& value,
                      std::chrono::milliseconds ttl, async_done done) override;
  void async_release(const identity& id, const lease_token& token, async_done done) override;
  void async_join_problem(const transaction& tx, async_handler<std::string> done) const override;
  void async_complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                                     std::chrono::milliseconds ttl, transaction& tx, async_done done) override;

 private:
  // Runs `call` (one operation `op` on the backing store), timed when the store is, its failure
  // counted.
  template <class Call>
  decltype(auto) measure(store_operation op, Call&& call);
  // The handler of an asynchronous `op` started now: times it and counts its failure, then calls
  // `done`.
  async_done measured(store_operation op, async_done done);
  // Reports a try_acquire that did not acquire and took `elapsed`: its wait, and a replay served
  // from the store's cache.
  void answered(scope_series& scope, const acquire_result& answer, std::chrono::steady_clock::duration elapsed);

  store& backing_;
  std::shared_ptr<metrics> target_;  // keeps the registry alive
  metrics_registry& registry_;
  store_series& series_;
};

}  // namespace idem::detail
