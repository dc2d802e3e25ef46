// runtime/core/async_call.cpp — engine_core::async_run: one asynchronous call, the steps of
// engine_call.cpp and transaction_call.cpp each started by the end of the one before.
#include <idem/detail/recycled.hpp>
#include <idem/engine.hpp>

#include <optional>

#include "call_events.hpp"
#include "caught.hpp"
#include "engine_core.hpp"
#include "transaction_call.hpp"

namespace idem::detail {

// Errors are caught with detail::caught (caught.hpp), so that they are handed on only after their
// catch block has ended.
//
// One asynchronous call: the steps of run_alone, or of run_in_transaction when it is given a
// transaction, each started by the end of the one before, so they never run at the same time.
// Owns what it uses, the engine's core included.
struct async_call : std::enable_shared_from_this<async_call> {
  // Takes the handlers by rvalue reference, so that each is moved only as its member is made, and
  // `done` is the last member made: when making the call throws, `d` is still the caller's to
  // report that with.
  async_call(std::shared_ptr<engine_core> c, context&& x, transaction* t, async_action&& a,
             std::function<payload()>&& e, async_handler<raw_outcome>&& d)
      : core(std::move(c)), ctx(std::move(x)), tx(t), action(std::move(a)), encode(std::move(e)), done(std::move(d)) {}

  void fail(std::exception_ptr error) { done(std::move(error), raw_outcome{in_flight{}}); }

  void claim(cancellation* cancel) {
    core->store_.async_try_acquire(ctx, cancel, [self = shared_from_this()](std::exception_ptr error,
                                                                           acquire_result claim) {
      self->claimed(std::move(error), std::move(claim));
    });
  }

  void claimed(std::exception_ptr error, acquire_result claim) {
    if (error) return fail(std::move(error));
    bool answered = false;
    if (std::exception_ptr refused = caught([&] {
          answered = core->answered(ctx, claim);
          if (answered) return;
          token = std::get<acquired>(claim).token;
          if (tx != nullptr) {
            in_tx = core->enter_transaction(ctx, token, *tx);
          } else {
            heartbeat = core->begin_held(ctx, token, /*on_this_thread=*/false);
          }
        }))
      return fail(std::move(refused));
    if (answered) return done(nullptr, std::move(claim));
    action([self = shared_from_this()](std::exception_ptr failure) { self->action_ended(std::move(failure)); });
  }

  void action_ended(std::exception_ptr cause) {
    if (cause) {
      if (in_tx) {
        engine_core::abandon(*in_tx);
        if (tx->active()) return release_when_transaction_ends(std::move(cause));
      } else {
        heartbeat.cancel();
      }
      core->store_.async_release(ctx.id, token, [self = shared_from_this(), cause](std::exception_ptr release_failure) mutable {
        if (self->in_tx) release_failure = engine_core::release_when_ended(*self->in_tx, *self->tx, std::move(release_failure));
        self->core->action_failed(self->ctx, self->token, cause, std::move(release_failure));
        self->fail(std::move(cause));
      });
      return;
    }
    std::exception_ptr encode_failure = caught([&] { value = encode(); });
    if (in_tx) return returned_in_transaction(std::move(encode_failure));
    if (encode_failure) return completed(std::move(encode_failure));
    core->store_.async_complete(ctx.id, token, value, ctx.ttl,
                                [self = shared_from_this()](std::exception_ptr failure) { self->completed(failure); });
  }

  // The action failed inside a transaction that cannot end before this call does: a release now
  // could wait behind the transaction's own locks (SQLite's one writer per file, once the action
  // wrote) until the store gave up. The record is released when the transaction ends instead,
  // which for a coroutine's own transaction is as soon as the call has failed.
  void release_when_transaction_ends(std::exception_ptr cause) {
    engine_core::release_at_end(*in_tx);
    core->action_failed(ctx, token, cause, nullptr);
    fail(std::move(cause));
  }

  void completed(std::exception_ptr failure) {
    raw_outcome result;
    if (std::exception_ptr error =
            caught([&] { result = core->finish(ctx, token, heartbeat, value, std::move(failure)); }))
      return fail(std::move(error));
    done(nullptr, std::move(result));
  }

  void returned_in_transaction(std::exception_ptr encode_failure) {
    std::optional<raw_outcome> terminal;
    if (std::exception_ptr error = caught([&] {
          in_tx->value = value;
          terminal = core->action_returned(*in_tx, std::move(encode_failure));
        }))
      return fail(std::move(error));
    if (terminal) return done(nullptr, std::move(*terminal));
    core->store_.async_complete_in_transaction(
        ctx.id, token, in_tx->value, ctx.ttl, *tx,
        [self = shared_from_this()](std::exception_ptr failure) { self->completed_inside(std::move(failure)); });
  }

  void completed_inside(std::exception_ptr failure) {
    raw_outcome result;
    if (std::exception_ptr error = caught([&] { result = core->completed_inside(in_tx, *tx, std::move(failure)); }))
      return fail(std::move(error));
    done(nullptr, std::move(result));
  }

  const std::shared_ptr<engine_core> core;
  const context ctx;
  transaction* const tx;  // null: outside a transaction
  const async_action action;
  const std::function<payload()> encode;
  lease_token token;
  heartbeat_scheduler::handle heartbeat;             // outside a transaction
  std::shared_ptr<engine_core::transaction_call> in_tx;  // inside one
  payload value;
  const async_handler<raw_outcome> done;  // made last: see the constructor
};

void engine_core::async_run(context ctx, transaction* tx, async_action action, std::function<payload()> encode,
                            cancellation* cancel, async_handler<raw_outcome> done) {
  const completion_mode completion = ctx.completion;  // ctx moves into the call
  std::shared_ptr<async_call> call;
  if (std::exception_ptr refused = caught([&] {
        ctx.validate();
        if (tx != nullptr && !tx->active()) tx = nullptr;
        if (ctx.completion == completion_mode::join_transaction)
          check_join_possible(ctx, tx, "for this asynchronous call (give it the transaction: engine::async_run, "
                                       "idem::async_execute(engine, ctx, tx, ...))");
        call = std::allocate_shared<async_call>(recycling_allocator<async_call>(), shared_from_this(), std::move(ctx),
                                                tx, std::move(action), std::move(encode), std::move(done));
      }))
    return done(std::move(refused), raw_outcome{in_flight{}});
  if (completion != completion_mode::join_transaction) return call->claim(cancel);
  // The store's answer about the transaction comes before anything is acquired.
  store_.async_join_problem(*tx, [call, cancel](std::exception_ptr error, std::string problem) {
    std::exception_ptr refusal = std::move(error);
    if (!refusal) refusal = caught([&] { check_join_answer(call->ctx, problem); });
    if (refusal) return call->fail(std::move(refusal));
    call->claim(cancel);
  });
}

}  // namespace idem::detail
