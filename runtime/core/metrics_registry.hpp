// runtime/core/metrics_registry.hpp — the series behind idem::metrics: what the engine's listener
// and its measured store (measured_store.hpp) increment, and what render() reads.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <idem/metrics.hpp>

namespace idem::detail {

// A Prometheus histogram of durations with fixed upper bounds (seconds). observe() is two relaxed
// increments; the count is derived from the buckets when read, so it always agrees with them.
class duration_histogram {
 public:
  // `bounds_seconds` ascending; the +Inf bucket is implicit.
  explicit duration_histogram(std::span<const double> bounds_seconds);

  void observe(std::chrono::nanoseconds elapsed) noexcept;

  struct reading {
    std::vector<std::uint64_t> cumulative;  // one per bound, then +Inf (= the count)
    double sum_seconds = 0;
  };
  [[nodiscard]] reading read() const;
  std::span<const double> bounds() const noexcept { return bounds_; }

 private:
  std::span<const double> bounds_;
  std::vector<std::int64_t> bounds_ns_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // non-cumulative, +Inf last
  std::atomic<std::uint64_t> sum_ns_{0};
};

// The series of one scope.
struct scope_series {
  scope_series();
  std::atomic<std::uint64_t> acquired{0};   // on_acquired
  std::atomic<std::uint64_t> executed{0};   // on_completed
  std::atomic<std::uint64_t> failed{0};     // on_failed
  std::atomic<std::uint64_t> replayed{0};   // on_duplicate
  std::atomic<std::uint64_t> in_flight{0};  // on_in_flight
  std::atomic<std::uint64_t> leases_lost{0};
  std::atomic<std::uint64_t> lease_steals{0};       // on_lease_taken_over
  std::atomic<std::uint64_t> fingerprint_mismatches{0};  // on_fingerprint_mismatch
  duration_histogram wait;  // try_acquire's duration for answers other than acquired
};

// The store operations an engine times, one `operation` label value each.
enum class store_operation : std::size_t {
  acquire,
  complete,
  release,
  extend,
  complete_in_transaction,
  extend_in_transaction,
  purge,
};
inline constexpr std::size_t store_operation_count = 7;
std::string_view label_of(store_operation op) noexcept;

// The series of one store (by store::name()).
struct store_series {
  explicit store_series(bool timed);
  const bool timed;  // false for an in_process() store: no latency series
  std::array<std::unique_ptr<duration_histogram>, store_operation_count> latency;
  std::array<std::atomic<std::uint64_t>, store_operation_count> errors{};
  std::atomic<std::uint64_t> heartbeat_extends{0};
  std::atomic<std::uint64_t> heartbeat_lost{0};    // extend found the lease gone
  std::atomic<std::uint64_t> heartbeat_errors{0};  // extend threw
  std::atomic<std::uint64_t> purges{0};
  std::atomic<std::uint64_t> purged_records{0};
  std::atomic<std::uint64_t> cache_hits{0};  // replays served from the store's own cache
};

class metrics_registry {
 public:
  explicit metrics_registry(const metrics_options& options);

  // The series of `scope`, created on first use (or the "~other" series beyond max_scopes). The
  // reference stays valid as long as the registry. Cheap when a thread asks for the scope it
  // asked for last.
  scope_series& scope(std::string_view scope);
  // The series of the store named `name`, created on first use.
  store_series& store(std::string_view name, bool timed);

  [[nodiscard]] std::string render() const;

 private:
  const std::uint64_t id_;  // tells registries apart in the thread-local cache of scope()
  const std::size_t max_scopes_;
  mutable std::mutex mutex_;  // guards the maps' structure; the series are atomics
  std::map<std::string, std::unique_ptr<scope_series>, std::less<>> scopes_;
  std::map<std::string, std::unique_ptr<store_series>, std::less<>> stores_;
};

}  // namespace idem::detail
