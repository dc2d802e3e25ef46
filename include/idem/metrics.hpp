// idem/metrics.hpp — what engines did, counted and timed, in Prometheus' text exposition format.
//
//   auto metrics = std::make_shared<idem::metrics>();
//   idem::engine engine{store, {}, {.metrics = metrics}};
//   ...
//   // GET /metrics:
//   response.set_content(metrics->render(), idem::metrics::content_type);
//
// An engine given a metrics object reports every call's outcome by scope, how long duplicates
// waited for their answer, how long each store operation took and how often it failed, the
// heartbeat's extends and failures, and the scheduled purges. Several engines may report to one
// object (their stores are told apart by the `store` label). Labels are bounded: the scope and
// the store's name, never the key. docs/operations.md says what each series means.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace idem {

class metrics;
namespace detail {
class metrics_registry;
// What an engine reports to (runtime/core/metrics_registry.hpp).
metrics_registry& registry_of(metrics& m) noexcept;
}  // namespace detail

struct metrics_options {
  // At most this many distinct scopes get series of their own; calls of further scopes are
  // counted under the scope label "~other" (a scope is code, not data, but nothing stops a caller
  // from building one per request, and every series costs the Prometheus server memory).
  std::size_t max_scopes = 1000;
};

// idem::metrics
//
// Thread-safe. Reporting costs a call a few relaxed atomic increments; a store that reports
// store::in_process() (memory_store) is not timed, since two clock reads would cost more than
// its operations. Not copyable; shared by the engines that report to it (engine_hooks::metrics).
class metrics {
 public:
  // The Content-Type of render()'s text.
  static constexpr std::string_view content_type = "text/plain; version=0.0.4; charset=utf-8";

  // Throws configuration_error if `options.max_scopes` is zero.
  explicit metrics(metrics_options options = {});
  ~metrics();
  metrics(const metrics&) = delete;
  metrics& operator=(const metrics&) = delete;

  // Every series reported so far, in the text exposition format 0.0.4 (one HELP and TYPE line per
  // family, counters ending in _total, durations in seconds). Safe to call while calls run: each
  // value is read atomically, so a scrape may see a call counted in one series and not yet in the
  // next, never a histogram whose count disagrees with its buckets.
  [[nodiscard]] std::string render() const;

 private:
  friend detail::metrics_registry& detail::registry_of(metrics& m) noexcept;
  std::unique_ptr<detail::metrics_registry> registry_;
};

}  // namespace idem
