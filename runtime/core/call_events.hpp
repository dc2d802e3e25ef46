// runtime/core/call_events.hpp — how a call's events reach the engine's listeners, and the words
// its failures are logged with: shared by the blocking, transactional and asynchronous steps.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include <idem/engine.hpp>

namespace idem::detail {

// What `e` says: its what(), or that its type is unknown.
[[nodiscard]] std::string describe(std::exception_ptr e);

// Whether `e` is a lease_lost_error: another caller took the record over.
[[nodiscard]] bool is_lease_lost(std::exception_ptr e);

// What a completion that failed after the action's work was `done` means for the key: the log line
// of log_and_return and of a completion after commit. Two causes, two different truths.
[[nodiscard]] std::string completion_loss(const context& ctx, std::string_view done, std::exception_ptr cause);

// notify's report of a listener that threw from `event`; a log sink that throws is ignored.
void report_listener_failure(const engine_hooks& hooks, std::string_view event, const context& ctx,
                             std::exception_ptr error) noexcept;

// Calls `call(listener)` on every listener; one that throws is logged and ignored.
template <class Call>
void notify(const engine_hooks& hooks, std::string_view event, const context& ctx, Call&& call) noexcept {
  for (const auto& listener : hooks.listeners) {
    try {
      call(*listener);
    } catch (...) {
      report_listener_failure(hooks, event, ctx, std::current_exception());
    }
  }
}

}  // namespace idem::detail
