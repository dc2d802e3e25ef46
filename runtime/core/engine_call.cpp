// runtime/core/engine_call.cpp — the steps of one call: the claim and what its answer means, a call
// that runs and completes on its own (no transaction), and a release after a failure.
#include <idem/engine.hpp>

#include <fmt/format.h>

#include "call_events.hpp"
#include "engine_core.hpp"

namespace idem::detail {

void engine_core::check_join_possible(const context& ctx, transaction* tx, std::string_view where) const {
  if (!store_.supports_transactional_completion())
    throw configuration_error(fmt::format(
        "{} asks for completion_mode::join_transaction, but {} cannot complete inside a caller's transaction; use a "
        "store that can, or completion_mode::autonomous",
        ctx.id.to_string(), store_.name()));
  if (tx == nullptr)
    throw configuration_error(fmt::format(
        "{} asks for completion_mode::join_transaction, but no transaction is active {}; open the "
        "transaction (idem::sqlite_transaction, idem::postgres_transaction or your own idem::transaction) "
        "around the call, or use completion_mode::autonomous",
        ctx.id.to_string(), where));
}

void engine_core::check_join_answer(const context& ctx, const std::string& problem) {
  if (!problem.empty())
    throw configuration_error(fmt::format("{} asks for completion_mode::join_transaction, but the active transaction "
                                          "cannot hold its record: {}",
                                          ctx.id.to_string(), problem));
}

raw_outcome engine_core::run(const context& ctx, function_ref<void()> action, function_ref<payload()> encode) {
  ctx.validate();  // a hand-built context is checked as strictly as make_context's
  transaction* tx = current_transaction();
  if (tx != nullptr && !tx->active()) tx = nullptr;
  if (ctx.completion == completion_mode::join_transaction) {
    check_join_possible(ctx, tx, "on this thread");
    check_join_answer(ctx, store_.join_problem(*tx));
  }

  raw_outcome answer = store_.try_acquire(ctx);  // the one object returned: a replay's payload is not moved
  if (!answered(ctx, answer)) {
    const lease_token token = std::get<acquired>(answer).token;
    answer = tx != nullptr ? run_in_transaction(ctx, token, *tx, action, encode)
                           : run_alone(ctx, token, action, encode);
  }
  return answer;
}

std::optional<raw_outcome> engine_core::run_at_once(const context& ctx, function_ref<void()> action,
                                                   function_ref<payload()> encode) {
  ctx.validate();
  // A join-transaction call is refused by async_run, which has the transaction to say why.
  if (ctx.completion == completion_mode::join_transaction) return std::nullopt;
  std::optional<raw_outcome> answer = store_.try_acquire_at_once(ctx);
  if (answer && !answered(ctx, *answer)) *answer = run_alone(ctx, std::get<acquired>(*answer).token, action, encode);
  return answer;
}

bool engine_core::answered(const context& ctx, acquire_result& claim) {
  if (auto* d = std::get_if<duplicate>(&claim)) {
    notify(hooks_, "on_duplicate", ctx, [&](lifecycle_listener& l) { l.on_duplicate(ctx, d->value, d->completed_at); });
    return true;
  }
  if (auto* f = std::get_if<in_flight>(&claim)) {
    notify(hooks_, "on_in_flight", ctx, [&](lifecycle_listener& l) { l.on_in_flight(ctx, f->retry_after); });
    return true;
  }
  if (auto* m = std::get_if<fingerprint_mismatch>(&claim)) {
    notify(hooks_, "on_fingerprint_mismatch", ctx, [&](lifecycle_listener& l) { l.on_fingerprint_mismatch(ctx); });
    throw fingerprint_mismatch_error(ctx.id.to_string(), std::move(m->stored), std::move(m->received));
  }
  if (const auto& a = std::get<acquired>(claim); a.took_over)
    notify(hooks_, "on_lease_taken_over", ctx, [&](lifecycle_listener& l) { l.on_lease_taken_over(ctx, a.token); });
  return false;
}

heartbeat_scheduler::handle engine_core::begin_held(const context& ctx, const lease_token& token,
                                                   bool on_this_thread) {
  heartbeat_scheduler::handle heartbeat;
  try {
    heartbeat = on_this_thread ? heartbeat_.start_here(ctx.id, token, ctx.lease)
                               : heartbeat_.start(ctx.id, token, ctx.lease);
  } catch (...) {
    release_quietly(ctx, token, "after its heartbeat could not start");
    throw;
  }
  notify(hooks_, "on_acquired", ctx, [&](lifecycle_listener& l) { l.on_acquired(ctx, token); });
  return heartbeat;
}

raw_outcome engine_core::finish(const context& ctx, const lease_token& token, heartbeat_scheduler::handle& heartbeat,
                                const payload& value, std::exception_ptr failure) {
  heartbeat.cancel();
  if (failure) return completion_failed(ctx, token, std::move(failure), false);
  notify(hooks_, "on_completed", ctx, [&](lifecycle_listener& l) { l.on_completed(ctx, token, value); });
  return action_ran;
}

void engine_core::released(const context& ctx, std::exception_ptr error, std::string_view after) const noexcept {
  if (!error) return;
  if (is_lease_lost(error)) {
    log(log_level::debug, fmt::format("lease on {} was taken over before it could be released {}", ctx.id.to_string(),
                                      after));
    return;
  }
  log(log_level::warning, fmt::format("could not release {} {}: {}; it stays in flight until its lease expires",
                                      ctx.id.to_string(), after, describe(error)));
}

void engine_core::release_quietly(const context& ctx, const lease_token& token, std::string_view after) noexcept {
  released(ctx, release_error(ctx, token), after);
}

// The action threw and its record was released (or could not be: `release_failure`, logged), so
// that a retry can succeed.
void engine_core::action_failed(const context& ctx, const lease_token& token, std::exception_ptr cause,
                                std::exception_ptr release_failure) noexcept {
  released(ctx, std::move(release_failure), "after its action failed");
  notify(hooks_, "on_failed", ctx, [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, failure_phase::action); });
}

void engine_core::action_threw(const context& ctx, const lease_token& token) noexcept {
  const std::exception_ptr cause = std::current_exception();
  action_failed(ctx, token, cause, release_error(ctx, token));
}

std::exception_ptr engine_core::release_error(const context& ctx, const lease_token& token) noexcept {
  try {
    store_.release(ctx.id, token);
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

// The work happened but its record could not be written, so the record is not released: it
// stays in progress until its lease expires and a retry steals it.
raw_outcome engine_core::completion_failed(const context& ctx, const lease_token& token, std::exception_ptr cause,
                                           bool always_propagate) {
  notify(hooks_, "on_failed", ctx,
         [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, failure_phase::completion); });
  if (always_propagate || config_.failure_policy == completion_failure_policy::propagate)
    std::rethrow_exception(cause);
  log(log_level::error, completion_loss(ctx, "succeeded", cause));
  return action_ran;
}

// No transaction: run, then complete on the store's own connection.
raw_outcome engine_core::run_alone(const context& ctx, const lease_token& token, function_ref<void()> action,
                                   function_ref<payload()> encode) {
  heartbeat_scheduler::handle heartbeat = begin_held(ctx, token, /*on_this_thread=*/true);
  try {
    action();
  } catch (...) {
    heartbeat.cancel();
    action_threw(ctx, token);
    throw;
  }
  payload value;
  std::exception_ptr failure;
  try {
    value = encode();
    store_.complete(ctx.id, token, value, ctx.ttl);
  } catch (...) {
    failure = std::current_exception();
  }
  return finish(ctx, token, heartbeat, value, std::move(failure));
}

}  // namespace idem::detail
