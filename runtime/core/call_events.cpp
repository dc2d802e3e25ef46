// runtime/core/call_events.cpp — the words a call's failures are logged with.
#include "call_events.hpp"

#include <fmt/format.h>

namespace idem::detail {

std::string describe(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

bool is_lease_lost(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const lease_lost_error&) {
    return true;
  } catch (...) {
    return false;
  }
}

std::string completion_loss(const context& ctx, std::string_view done, std::exception_ptr cause) {
  if (is_lease_lost(cause))
    return fmt::format("action for {} {}, but its lease had expired and another caller took the record over ({}); "
                       "the action may have run twice, and duplicates replay the other caller's result",
                       ctx.id.to_string(), done, describe(cause));
  return fmt::format("action for {} {}, but its completion could not be recorded ({}); the record stays in progress "
                     "until its lease expires, after which a duplicate runs the action again",
                     ctx.id.to_string(), done, describe(cause));
}

void report_listener_failure(const engine_hooks& hooks, std::string_view event, const context& ctx,
                             std::exception_ptr error) noexcept {
  try {
    hooks.log({log_level::warning, fmt::format("lifecycle listener threw from {} for {}; ignoring it: {}", event,
                                               ctx.id.to_string(), describe(std::move(error)))});
  } catch (...) {
  }
}

}  // namespace idem::detail
