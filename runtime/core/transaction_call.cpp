// runtime/core/transaction_call.cpp — a call under the caller's transaction: its record completed
// after the commit (autonomous) or inside it (join_transaction), released after a rollback.
#include "transaction_call.hpp"

#include <fmt/format.h>

#include "call_events.hpp"

namespace idem::detail {

void engine_core::transaction_call::confirm_lease(transaction& tx) {
  if (current == stage::done) return;
  if (owner.store_.extend_in_transaction(ctx.id, token, ctx.lease, tx)) return;
  lost = true;
  throw lease_lost_error(fmt::format("cannot commit the transaction: the lease on {} expired and another caller took "
                                     "the record over, so its work would be done twice",
                                     ctx.id.to_string()),
                         "commit", ctx.id.to_string());
}

void engine_core::transaction_call::transaction_ended(ending how) noexcept {
  if (release_deferred()) return;
  if (current == stage::action) {
    ended = how;  // acted on when the action returns
    return;
  }
  if (current != stage::waiting) return;
  current = stage::done;
  if (how == ending::rolled_back)
    release_after_rollback();
  else if (ctx.completion == completion_mode::join_transaction)
    completed_inside();
  else
    complete_now("committed");
}

void engine_core::transaction_call::completed_inside() noexcept {
  heartbeat.cancel();
  notify(owner.hooks_, "on_completed", ctx, [&](lifecycle_listener& l) { l.on_completed(ctx, token, value); });
}

void engine_core::transaction_call::complete_now(std::string_view done) noexcept {
  try {
    owner.store_.complete(ctx.id, token, value, ctx.ttl);
    heartbeat.cancel();
    notify(owner.hooks_, "on_completed", ctx, [&](lifecycle_listener& l) { l.on_completed(ctx, token, value); });
  } catch (...) {
    heartbeat.cancel();
    const auto cause = std::current_exception();
    owner.log(log_level::error, completion_loss(ctx, done, cause));
    notify(owner.hooks_, "on_failed", ctx,
           [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, failure_phase::completion); });
  }
}

bool engine_core::transaction_call::release_deferred() noexcept {
  if (current != stage::release_at_end) return false;
  current = stage::done;
  owner.release_quietly(ctx, token, "after its action failed and its transaction ended");
  return true;
}

void engine_core::transaction_call::release_after_rollback() noexcept {
  heartbeat.cancel();
  owner.release_quietly(ctx, token, "after its transaction rolled back");
  // A commit refused because the lease was lost is a failed completion; any other end a rollback.
  const auto cause = lost ? std::make_exception_ptr(lease_lost_error(fmt::format(
                                "the lease on {} was lost before its transaction committed", ctx.id.to_string())))
                          : std::make_exception_ptr(rollback_error(ctx.id.to_string()));
  const failure_phase phase = lost ? failure_phase::completion : failure_phase::rollback;
  notify(owner.hooks_, "on_failed", ctx, [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, phase); });
}

std::shared_ptr<engine_core::transaction_call> engine_core::enter_transaction(const context& ctx,
                                                                              const lease_token& token,
                                                                              transaction& tx) {
  // Everything the transaction's end needs is registered before the action runs, so that an end
  // inside the action is seen, and a failure to register releases the key at once.
  std::shared_ptr<transaction_call> call;
  try {
    call = std::make_shared<transaction_call>(*this, ctx, token);
    call->heartbeat = heartbeat_.start(call->ctx.id, token, ctx.lease);
    tx.after_rollback([call] { call->transaction_ended(transaction_call::ending::rolled_back); });
    tx.after_commit([call] { call->transaction_ended(transaction_call::ending::committed); });
    if (ctx.completion == completion_mode::autonomous)
      tx.before_commit([call, &tx] { call->confirm_lease(tx); });
  } catch (...) {
    if (call) abandon(*call);
    release_quietly(ctx, token, "after it could not take part in the caller's transaction");
    throw;
  }
  notify(hooks_, "on_acquired", ctx, [&](lifecycle_listener& l) { l.on_acquired(ctx, token); });
  return call;
}

void engine_core::abandon(transaction_call& call) noexcept {
  call.current = transaction_call::stage::done;
  call.heartbeat.cancel();
}

std::exception_ptr engine_core::release_when_ended(transaction_call& call, const transaction& tx,
                                                   std::exception_ptr failure) noexcept {
  if (!failure || is_lease_lost(failure) || !tx.active()) return failure;
  call.owner.log(log_level::debug, fmt::format("{} is released when its transaction ends: {}", call.ctx.id.to_string(),
                                               describe(failure)));
  release_at_end(call);
  return nullptr;
}

void engine_core::release_at_end(transaction_call& call) noexcept {
  call.current = transaction_call::stage::release_at_end;
}

std::optional<raw_outcome> engine_core::action_returned(transaction_call& call, std::exception_ptr encode_failure) {
  const context& ctx = call.ctx;
  if (encode_failure) {
    abandon(call);
    return completion_failed(ctx, call.token, std::move(encode_failure),
                             ctx.completion == completion_mode::join_transaction);
  }
  // The action ended the transaction itself.
  if (call.ended == transaction_call::ending::rolled_back) {
    call.current = transaction_call::stage::done;
    call.release_after_rollback();
    return action_ran;
  }
  if (call.ended == transaction_call::ending::committed) {
    call.current = transaction_call::stage::done;
    if (ctx.completion == completion_mode::join_transaction)
      log(log_level::warning, fmt::format("the transaction of {} committed inside its action, so its record is written "
                                          "after the commit instead of inside it",
                                          ctx.id.to_string()));
    call.complete_now("committed");
    return action_ran;
  }
  if (ctx.completion == completion_mode::join_transaction) return std::nullopt;
  call.current = transaction_call::stage::waiting;
  return action_ran;
}

raw_outcome engine_core::completed_inside(const std::shared_ptr<transaction_call>& call, transaction& tx,
                                          std::exception_ptr failure) {
  if (failure) {
    // The terminal is this failure; a later rollback only frees the key (the record stays in
    // progress under our token after it).
    abandon(*call);
    try {
      tx.after_rollback([this, call] { release_quietly(call->ctx, call->token, "after its transaction rolled back"); });
    } catch (...) {
      // Without the callback the record stays in progress until its lease expires.
    }
    return completion_failed(call->ctx, call->token, std::move(failure), true);
  }
  call->current = transaction_call::stage::waiting;
  return action_ran;
}

raw_outcome engine_core::run_in_transaction(const context& ctx, const lease_token& token, transaction& tx,
                                            function_ref<void()> action, function_ref<payload()> encode) {
  const std::shared_ptr<transaction_call> call = enter_transaction(ctx, token, tx);
  try {
    action();
  } catch (...) {
    abandon(*call);
    const std::exception_ptr cause = std::current_exception();
    action_failed(ctx, token, cause, release_when_ended(*call, tx, release_error(ctx, token)));
    throw;
  }
  std::exception_ptr encode_failure;
  try {
    call->value = encode();
  } catch (...) {
    encode_failure = std::current_exception();
  }
  if (std::optional<raw_outcome> terminal = action_returned(*call, std::move(encode_failure))) return *terminal;
  std::exception_ptr failure;
  try {
    store_.complete_in_transaction(ctx.id, token, call->value, ctx.ttl, tx);
  } catch (...) {
    failure = std::current_exception();
  }
  return completed_inside(call, tx, std::move(failure));
}

}  // namespace idem::detail
