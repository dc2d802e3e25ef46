// runtime/core/transaction_call.hpp — the state of one call under the caller's transaction, whose
// terminal the transaction's end decides. The blocking and the asynchronous call share it.
#pragma once

#include <string_view>

#include <idem/engine.hpp>
#include <idem/transaction.hpp>

#include "engine_core.hpp"
#include "heartbeat_scheduler.hpp"

namespace idem::detail {

// Lives on the heap, shared by the call and the transaction's callbacks, which may run during the
// action (the action commits or rolls back itself) or after the call returned.
class engine_core::transaction_call {
 public:
  enum class stage {
    action,          // the action runs; a transaction end is only recorded
    waiting,         // the action returned; the transaction's end decides the terminal
    release_at_end,  // the action threw and its release could not be made yet: the end makes it
    done,            // the terminal was reported (or the call failed): callbacks do nothing
  };
  enum class ending { none, committed, rolled_back };

  transaction_call(engine_core& e, const context& c, const lease_token& t) : owner(e), ctx(c), token(t) {}

  // Before the commit: the lease must still be ours, or the work must not commit (throws
  // lease_lost_error, which makes the transaction roll back).
  void confirm_lease(transaction& tx);
  // The transaction ended `how` (committed or rolled_back), as its callbacks report it: the
  // terminal, or, while the action still runs, what the action's return acts on.
  void transaction_ended(ending how) noexcept;
  // The record was written inside the transaction that has now committed.
  void completed_inside() noexcept;
  // Writes the record on the store's own connection; its work has already committed (`done` says
  // how, for the log line when the write fails).
  void complete_now(std::string_view done) noexcept;
  // Makes the release that release_when_ended() deferred, once: true if there was one.
  bool release_deferred() noexcept;
  void release_after_rollback() noexcept;

  engine_core& owner;
  const context ctx;
  const lease_token token;
  payload value;
  heartbeat_scheduler::handle heartbeat;
  stage current = stage::action;
  ending ended = ending::none;
  bool lost = false;
};

}  // namespace idem::detail
