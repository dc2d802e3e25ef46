// idem/listener.hpp — lifecycle callbacks, for metrics, tracing and audit.
#pragma once

#include <chrono>
#include <exception>
#include <string_view>

#include <idem/context.hpp>
#include <idem/lease_token.hpp>
#include <idem/payload.hpp>

namespace idem {

// Why an acquired lease ended without a completed record.
enum class failure_phase {
  action,      // the action threw; the record was released and a retry runs it again
  completion,  // the action succeeded but the record could not be written; indeterminate
  rollback,    // the caller's transaction rolled back; the record was released
};
std::string_view to_string(failure_phase phase) noexcept;

// idem::lifecycle_listener
//
// Every member is a no-op by default. Callbacks run synchronously on the calling thread (the
// terminal ones of a transactional call on the thread that ends the transaction), in
// registration order. For every acquired lease exactly one terminal callback fires, on_completed
// xor on_failed, always after on_acquired with the same token. A listener that throws is reported
// through the engine's log sink and ignored; it cannot change the call's result.
class lifecycle_listener {
 public:
  virtual ~lifecycle_listener() = default;

  // The record was in progress under a lease that had lapsed (its holder crashed, or stalled past
  // its lease), and this caller took it over under `token`: the previous holder's action may have
  // run in part. on_acquired follows once the heartbeat has started.
  virtual void on_lease_taken_over(const context&, const lease_token& /*token*/) {}
  // The caller holds the record; the action is about to run on this thread.
  virtual void on_acquired(const context&, const lease_token&) {}
  // The store confirmed the record complete.
  virtual void on_completed(const context&, const lease_token&, const payload&) {}
  // The lease ended without a completed record; `cause` says why.
  virtual void on_failed(const context&, const lease_token&, std::exception_ptr /*cause*/, failure_phase) {}
  // A completed record was replayed (no lease was taken).
  virtual void on_duplicate(const context&, const payload&, std::chrono::system_clock::time_point /*completed_at*/) {}
  // The record was held by another caller beyond this caller's wait (no lease was taken).
  virtual void on_in_flight(const context&, std::chrono::milliseconds /*retry_after*/) {}
  // The record is complete but was created with a different request fingerprint; the call fails
  // with fingerprint_mismatch_error (no lease was taken).
  virtual void on_fingerprint_mismatch(const context&) {}
};

}  // namespace idem
