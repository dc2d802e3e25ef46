// idem/asio.hpp — idempotent calls that suspend instead of blocking, on Boost.Asio (target idem::asio).
//
//   boost::asio::awaitable<void> on(const OrderPlaced& event) {
//     auto ctx = engine.make_context("Orders.on", event.id, {.wait = std::chrono::seconds(5)});
//     idem::outcome<Receipt> o = co_await idem::async_execute(
//         engine, ctx, [&]() -> boost::asio::awaitable<Receipt> { co_return co_await settle(event); },
//         idem::json_codec{}, boost::asio::use_awaitable);
//   }
//
// async_execute follows Asio's completion-token rules (use_awaitable, deferred, use_future, a
// callback), with the completion signature void(std::exception_ptr, idem::outcome<T>): with
// use_awaitable, co_await yields the outcome or rethrows. The semantics are engine::execute's
// (executed, replayed, in flight; release on a throw; heartbeat; listeners exactly once; the
// completion-failure policy; fingerprints), and no thread is parked for the call: a duplicate's
// wait is a registration in the store plus a timer (see store::async_try_acquire for stores
// without asynchronous operations of their own).
//
// Where things run: the action, and the completion, on the completion handler's associated
// executor (the coroutine's with use_awaitable; a plain callback without one gets
// boost::asio::system_executor). The call keeps that executor's work count up until it completes.
//
// With use_awaitable the call is a coroutine of its own that suspends only to wait: a store that
// answers at once (the memory store; the Redis store's local cache) answers without a trip
// through the executor's queue, and a plain action outside a transaction then runs as execute()
// runs it, allocating no more than execute() does. Every other token follows Asio's rule that a
// handler never runs inside the initiating function.
//
// Cancellation (bind_cancellation_slot, awaitable operators `||`): requested while the call waits
// for a holder, it completes with boost::asio::error::operation_aborted and changes nothing
// stored; requested while an awaitable action runs, it is passed on to the action, which decides:
// if it ends by throwing, the record is released as for any throw. A plain action is not
// interrupted.
//
// Transactions: a thread's active transaction does not survive a co_await, so asynchronous calls
// ignore it and take one explicitly (the overloads with a `transaction&`); completion_mode::
// join_transaction without one is refused (configuration_error through the token).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <idem/codec.hpp>
#include <idem/detail/recycled.hpp>
#include <idem/engine.hpp>
#include <idem/invoke.hpp>
#include <idem/asio_event_loop.hpp>
#include <idem/outcome.hpp>

namespace idem {
namespace detail::asio {

// The value type of an action: T for a callable returning boost::asio::awaitable<T>, else its
// result type.
template <class R>
struct action_traits {
  using value_type = R;
};
template <class T, class Executor>
struct action_traits<boost::asio::awaitable<T, Executor>> {
  using value_type = T;
};
template <class Action>
using action_result = std::remove_cvref_t<std::invoke_result_t<Action&>>;
template <class Action>
using value_of = typename action_traits<action_result<Action>>::value_type;

// A codec for calls whose action returns nothing: the record is payload::none().
struct no_codec {};

// What an error delivered by the engine means to an Asio caller: a cancelled wait is
// operation_aborted; everything else is passed on unchanged.
inline std::exception_ptr for_asio(std::exception_ptr error) {
  if (!error) return error;
  try {
    std::rethrow_exception(error);
  } catch (const operation_cancelled&) {
    return std::make_exception_ptr(boost::system::system_error(boost::asio::error::operation_aborted));
  } catch (...) {
    return error;
  }
}

// What keeps `executor`'s execution context from running out of work while a call is pending
// (Asio's rule for an asynchronous operation): the executor preferring outstanding_work.tracked
// for a standard executor — a strand of any_io_executor has no on_work_started, so
// executor_work_guard does not compile for it — and executor_work_guard for an executor of the
// older kind. Reset when the call completes.
template <class Executor>
auto track_work(const Executor& executor) {
  if constexpr (boost::asio::execution::is_executor<Executor>::value) {
    return std::optional(boost::asio::prefer(executor, boost::asio::execution::outstanding_work.tracked));
  } else {
    return std::optional(boost::asio::make_work_guard(executor));
  }
}

// What a call keeps of its action's result: T, or bool ("the void action returned").
template <class T>
using stored_value = std::conditional_t<std::is_void_v<T>, bool, T>;

// Runs a plain (not coroutine) action, leaving what it returned in `value`: true for an action
// returning nothing.
template <class T, class Action, class Stored>
void run_plain(Action& action, std::optional<Stored>& value) {
  if constexpr (std::is_void_v<T>) {
    std::invoke(action);
    value.emplace(true);
  } else {
    value.emplace(std::invoke(action));
  }
}

// The record of what a call's action returned (`value`, engaged).
template <class T, class Codec, class Stored>
payload encoded(const Codec& codec, const std::optional<Stored>& value) {
  if constexpr (std::is_void_v<T>) {
    return payload::none();
  } else {
    return codec.encode(*value);
  }
}

// The steps of one call that do not depend on how it completes: starting the engine's call,
// passing cancellation on, running the action on the call's executor and encoding its value.
// `Derived` (operation, coroutine_call) delivers the engine's answer: finish(error, raw).
// Shared by the engine's callbacks, the cancellation slot's handler and the completion.
template <class Derived, class T, class Executor, class Action, class Codec>
class call_steps : public std::enable_shared_from_this<Derived> {
 public:
  using executor_type = Executor;
  using stored = stored_value<T>;

  call_steps(Executor executor, Action action, Codec codec)
      : executor_(std::move(executor)), action_(std::move(action)), codec_(std::move(codec)) {}

  // `tx` may be null: outside a transaction. `slot`: where a cancellation request arrives; a slot
  // that is not connected can never ask for one, and the engine is then given none, which spares
  // the store installing and clearing a handler (a lock, an allocation).
  void start(engine& eng, context ctx, transaction* tx, boost::asio::cancellation_slot slot) {
    cancellation* cancel = nullptr;
    if (slot.is_connected()) {
      cancel = &cancel_.emplace();
      std::weak_ptr<Derived> weak = self();
      slot.assign([weak](boost::asio::cancellation_type type) {
        if (auto call = weak.lock()) call->cancel(type);
      });
    }
    // The engine calls `act` and `encode` only before `done`, which keeps this call alive: they
    // refer to it without owning it.
    Derived* const call = static_cast<Derived*>(this);
    async_action act = [call](async_done finished) { call->run_action(std::move(finished)); };
    std::function<payload()> encode = [call]() -> payload { return call->encode(); };
    async_handler<detail::raw_outcome> done = [self = self()](std::exception_ptr error, detail::raw_outcome raw) {
      self->stage_.store(stage::done);
      self->finish(std::move(error), std::move(raw));
    };
    if (tx != nullptr) {
      eng.async_run(std::move(ctx), *tx, std::move(act), std::move(encode), cancel, std::move(done));
    } else {
      eng.async_run(std::move(ctx), std::move(act), std::move(encode), cancel, std::move(done));
    }
  }

 protected:
  std::shared_ptr<Derived> self() { return static_cast<Derived*>(this)->shared_from_this(); }

  // The outcome the engine's answer stands for, decoded with the codec; what it failed with, as an
  // Asio caller sees it, otherwise (the outcome is then a placeholder).
  std::pair<std::exception_ptr, outcome<T>> decoded(std::exception_ptr error, detail::raw_outcome raw) {
    std::optional<outcome<T>> result;
    if (!error) {
      try {
        result.emplace(detail::outcome_of<T>(raw, codec_, value_));
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (!result) result.emplace(in_flight{});
    return {for_asio(std::move(error)), std::move(*result)};
  }

  Executor executor_;

 private:
  enum class stage { claiming, acting, done };

  void cancel(boost::asio::cancellation_type type) {
    const stage now = stage_.load();
    if (now == stage::claiming) {
      cancel_->request();
    } else if (now == stage::acting) {
      child_.emit(type);
    }
  }

  void run_action(async_done finished) {
    stage_.store(stage::acting);
    if (cancel_ && cancel_->requested()) child_.emit(boost::asio::cancellation_type::terminal);
    // The action is not the completion handler: it may run at once when this thread runs the
    // executor, and is queued otherwise. A coroutine's call knows it without asking the executor.
    if (static_cast<const Derived*>(this)->on_callers_thread()) return invoke_action(std::move(finished));
    boost::asio::dispatch(executor_, [self = self(), finished = std::move(finished)]() mutable {
      self->invoke_action(std::move(finished));
    });
  }

  // An error is handed to `finished` only once its catch block has ended: `finished` may take it
  // to another thread at once, which must not share it with a thread still inside the catch block.
  void invoke_action(async_done finished) {
    if constexpr (is_asio_coroutine<action_result<Action>>) {
      auto self = this->self();
      std::optional<action_result<Action>> coroutine;
      std::exception_ptr not_started;  // handed on after the catch block (see invoke_action)
      try {
        coroutine.emplace(std::invoke(action_));
      } catch (...) {
        not_started = std::current_exception();
      }
      if (not_started) return finished(std::move(not_started));
      if constexpr (std::is_void_v<T>) {
        boost::asio::co_spawn(executor_, std::move(*coroutine),
                              boost::asio::bind_cancellation_slot(
                                  child_.slot(), [self, finished = std::move(finished)](std::exception_ptr error) {
                                    if (!error) self->value_.emplace(true);
                                    finished(error);
                                  }));
      } else {
        boost::asio::co_spawn(executor_, std::move(*coroutine),
                              boost::asio::bind_cancellation_slot(
                                  child_.slot(), [self, finished = std::move(finished)](std::exception_ptr error, T value) {
                                    if (!error) self->value_.emplace(std::move(value));
                                    finished(error);
                                  }));
      }
    } else {
      std::exception_ptr error;
      try {
        run_plain<T>(action_, value_);
      } catch (...) {
        error = std::current_exception();
      }
      finished(error);
    }
  }

  payload encode() { return encoded<T>(codec_, value_); }

  Action action_;
  Codec codec_;
  std::optional<stored> value_;
  std::optional<cancellation> cancel_;    // the engine's wait for a holder, when the slot is connected
  boost::asio::cancellation_signal child_;  // passed on to an awaitable action
  std::atomic<stage> stage_{stage::claiming};
};

// A call started through a completion token: completes by calling the token's handler on its
// associated executor, by Asio's rules.
template <class T, class Handler, class Action, class Codec>
class operation
    : public call_steps<operation<T, Handler, Action, Codec>, T,
                        boost::asio::associated_executor_t<Handler, boost::asio::system_executor>, Action, Codec> {
  using base = call_steps<operation, T, boost::asio::associated_executor_t<Handler, boost::asio::system_executor>,
                          Action, Codec>;
  friend base;

 public:
  operation(Handler handler, Action action, Codec codec)
      : base(boost::asio::get_associated_executor(handler, boost::asio::system_executor()), std::move(action),
             std::move(codec)),
        handler_(std::move(handler)),
        work_(track_work(this->executor_)) {}

  void start(engine& eng, context ctx, transaction* tx) {
    base::start(eng, std::move(ctx), tx, boost::asio::get_associated_cancellation_slot(handler_));
    initiating_.store(false);
  }

 private:
  // The initiating function may run on any thread, not necessarily the executor's.
  bool on_callers_thread() const noexcept { return false; }

  void finish(std::exception_ptr error, detail::raw_outcome raw) {
    auto complete = [self = this->self(), answer = this->decoded(std::move(error), std::move(raw))]() mutable {
      boost::asio::get_associated_cancellation_slot(self->handler_).clear();
      Handler handler = std::move(self->handler_);
      self->work_.reset();
      std::move(handler)(std::move(answer.first), std::move(answer.second));
    };
    // Asio's rule: never inside the initiating function (an answer at hand, a replay, is queued);
    // later, at once when this thread runs the executor.
    if (initiating_.load()) {
      boost::asio::post(this->executor_, std::move(complete));
    } else {
      boost::asio::dispatch(this->executor_, std::move(complete));
    }
  }

  Handler handler_;
  decltype(track_work(std::declval<const typename base::executor_type&>())) work_;
  std::atomic<bool> initiating_{true};  // start() has not returned yet
};

// A call made from a coroutine on `Executor` (async_execute given use_awaitable_t<Executor>): an
// answer that arrives before start() returns (a replay from the memory store, or from the Redis
// store's local cache) is taken without suspending; otherwise the coroutine suspends until it
// comes and resumes on its executor. Nothing is queued on the way unless the coroutine waits.
template <class T, class Executor, class Action, class Codec>
class coroutine_call : public call_steps<coroutine_call<T, Executor, Action, Codec>, T, Executor, Action, Codec> {
  using base = call_steps<coroutine_call, T, Executor, Action, Codec>;
  friend base;
  using resumer = typename boost::asio::async_result<boost::asio::use_awaitable_t<Executor>, void()>::handler_type;

 public:
  coroutine_call(Executor executor, Action action, Codec codec)
      : base(std::move(executor), std::move(action), std::move(codec)) {}

  // The outcome of the call `owner` (not started yet), or what it failed with thrown, once it has
  // completed: at once, or after suspending the calling coroutine.
  //
  // While suspended the coroutine does not own the call: the engine's steps do, and then the
  // completion that resumes it. A store that drops a handler uncalled thus frees the call and with
  // it the suspended coroutine (Asio destroys a coroutine whose resumption is destroyed): nothing
  // leaks, no work is counted for it, and its heartbeat ends with it.
  static boost::asio::awaitable<outcome<T>, Executor> result(std::shared_ptr<coroutine_call> owner, engine& eng,
                                                             context ctx, transaction* tx) {
    coroutine_call* const call = owner.get();
    boost::asio::cancellation_state cancellation = co_await boost::asio::this_coro::cancellation_state;
    starting_here = call;
    call->start(eng, std::move(ctx), tx, cancellation.slot());
    starting_here = nullptr;
    if (call->state_.load(std::memory_order_acquire) != ready) {
      std::shared_ptr<coroutine_call>* const given = &owner;  // handed over once suspended
      co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<Executor>, void()>(
          [call, given](resumer resume) { call->suspended(std::move(resume), std::move(*given)); },
          boost::asio::use_awaitable_t<Executor>());
    }
    // Resumed (or never suspended): the completion that resumed it keeps `call` alive meanwhile.
    // A handler the call installed in the slot stays there until the coroutine's next
    // asynchronous operation otherwise.
    cancellation.slot().clear();
    if (call->answer_->first) std::rethrow_exception(std::move(call->answer_->first));
    co_return std::move(call->answer_->second);
  }

 private:
  enum : int { pending, waiting, ready };

  // start() runs inside the coroutine, on its executor: a step the engine takes before start()
  // returns is on that executor too, and runs the action there at once.
  static inline thread_local const coroutine_call* starting_here = nullptr;
  bool on_callers_thread() const noexcept { return starting_here == this; }

  // The coroutine has suspended: resumed when the answer comes, or now if it came meanwhile
  // (through the executor's queue: never inside the initiating function). `owner` is the
  // coroutine's reference, given up here, or handed to that resumption. Touches nothing of this
  // call once the answer may come: the caller's `owner` may then be the last reference.
  void suspended(resumer resume, std::shared_ptr<coroutine_call> owner) {
    resume_.emplace(std::move(resume));
    work_.emplace(track_work(this->executor_));
    int expected = pending;
    if (state_.compare_exchange_strong(expected, waiting, std::memory_order_acq_rel)) return;
    boost::asio::post(this->executor_, [owner = std::move(owner)] { owner->resume(); });
  }

  void finish(std::exception_ptr error, detail::raw_outcome raw) {
    answer_.emplace(this->decoded(std::move(error), std::move(raw)));
    if (state_.exchange(ready, std::memory_order_acq_rel) == waiting)
      boost::asio::dispatch(this->executor_, [self = this->self()] { self->resume(); });
  }

  void resume() {
    resumer resume = std::move(*resume_);
    resume_.reset();
    work_.reset();
    std::move(resume)();
  }

  std::atomic<int> state_{pending};
  std::optional<std::pair<std::exception_ptr, outcome<T>>> answer_;
  std::optional<resumer> resume_;
  std::optional<decltype(track_work(std::declval<const Executor&>()))> work_;
};

// use_awaitable_t<Executor>'s Executor.
template <class Token>
struct awaitable_token {
  static constexpr bool value = false;
};
template <class Executor>
struct awaitable_token<boost::asio::use_awaitable_t<Executor>> {
  static constexpr bool value = true;
  using executor_type = Executor;
};

// Runs `start(done)` — a step of idem's core that reports through a callback, on any thread — as an
// Asio asynchronous operation with the completion signature void(std::exception_ptr, Values...):
// the handler runs on its associated executor, never inside this function, and that executor's
// work count is kept up until it does.
template <class... Values, class Start, class CompletionToken>
auto async_step(Start start, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, Values...)>(
      [](auto handler, Start begin) {
        auto executor = boost::asio::get_associated_executor(handler, boost::asio::system_executor());
        struct pending {
          decltype(handler) waiting;
          decltype(track_work(executor)) work;
        };
        // Shared: the step's callback is a std::function, which must be copyable; the handler is not.
        auto state = std::make_shared<pending>(pending{std::move(handler), track_work(executor)});
        begin([state, executor](std::exception_ptr error, Values... values) {
          boost::asio::post(executor, [state, error = std::move(error), ... values = std::move(values)]() mutable {
            auto waiting = std::move(state->waiting);
            state->work.reset();
            std::move(waiting)(std::move(error), std::move(values)...);
          });
        });
      },
      token, std::move(start));
}

// Runs `step` (a blocking call) on idem's pool of threads for blocking calls as an Asio operation
// that completes with void(std::exception_ptr): what `step` threw, or null.
template <class Step, class CompletionToken>
auto async_blocking(Step step, CompletionToken&& token) {
  return async_step<>([step = std::move(step)](async_done done) { run_blocking(step, std::move(done)); },
                      std::forward<CompletionToken>(token));
}

// The transaction of a coroutine annotated with transaction = "required", begun from `source`
// bound to no thread, through the source's asynchronous step (off the coroutine's thread for a
// blocking transaction, see idem::is_blocking_transaction).
template <class Executor>
boost::asio::awaitable<std::unique_ptr<opened_transaction>, Executor> begin_transaction(transaction_source& source) {
  co_return co_await async_step<std::unique_ptr<opened_transaction>>(
      [&source](async_handler<std::unique_ptr<opened_transaction>> done) {
        source.async_begin_unbound(std::move(done));
      },
      boost::asio::use_awaitable_t<Executor>());
}

// Ends `tx` after its call: commits it when the call did not fail, rolls it back when it failed or
// its commit did, and rethrows the failure. Both steps are `tx`'s asynchronous ones.
template <class Executor>
boost::asio::awaitable<void, Executor> end_transaction(opened_transaction& tx, std::exception_ptr failure) {
  const boost::asio::use_awaitable_t<Executor> on_this_executor;
  if (!failure) {
    try {
      co_await async_step<>([&tx](async_done done) { tx.async_commit(std::move(done)); }, on_this_executor);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  if (failure) {
    co_await async_step<>([&tx](async_done done) { tx.async_rollback(std::move(done)); }, on_this_executor);
    std::rethrow_exception(failure);
  }
}

template <class T, class Action, class Codec, class CompletionToken>
auto initiate_with_token(engine& eng, const context& ctx, transaction* tx, Action&& action, Codec codec,
                         CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, outcome<T>)>(
      // `c` is async_initiate's own copy of the caller's context (a token that defers the call keeps
      // one), moved on to the engine's call.
      [&eng, tx](auto handler, context c, auto act, Codec cod) {
        using op_type = operation<T, decltype(handler), decltype(act), Codec>;
        // Not the handler's associated allocator: Asio wants its memory given back before the handler
        // runs, and the call may outlive that (its heartbeat, a store's late answer).
        std::allocate_shared<op_type>(idem::detail::recycling_allocator<op_type>(), std::move(handler), std::move(act),
                                      std::move(cod))
            ->start(eng, std::move(c), tx);
      },
      token, ctx, std::forward<Action>(action), std::move(codec));
}

// The call of a plain action outside a transaction, made on this thread when the store answers
// at once (engine::run_at_once); nullopt, having done nothing, otherwise.
template <class T, class Action, class Codec>
std::optional<outcome<T>> run_at_once(engine& eng, const context& ctx, Action& action, const Codec& codec) {
  std::optional<stored_value<T>> value;
  auto run = [&] { run_plain<T>(action, value); };
  auto encode = [&]() -> payload { return encoded<T>(codec, value); };
  std::optional<detail::raw_outcome> raw = eng.run_at_once(ctx, run, encode);
  if (!raw) return std::nullopt;
  return detail::outcome_of<T>(*raw, codec, value);
}

// A coroutine's call (use_awaitable_t<Executor>): a coroutine of its own, which suspends only to
// wait. `ctx`, `action` and `codec` are its own copies, as async_initiate's would be. A plain
// action outside a transaction whose store answers at once runs at once, as execute() would run
// it: nothing suspends, and nothing is allocated beyond what execute() allocates.
template <class T, class Executor, class Action, class Codec>
boost::asio::awaitable<outcome<T>, Executor> execute_in_coroutine(engine& eng, context ctx, transaction* tx,
                                                                  Action action, Codec codec) {
  if constexpr (!is_asio_coroutine<action_result<Action>>) {
    if (tx == nullptr) {
      std::optional<outcome<T>> at_once = run_at_once<T>(eng, ctx, action, codec);
      if (at_once) co_return std::move(*at_once);
    }
  }
  using call_type = coroutine_call<T, Executor, Action, Codec>;
  Executor executor = co_await boost::asio::this_coro::executor;
  co_return co_await call_type::result(
      std::allocate_shared<call_type>(idem::detail::recycling_allocator<call_type>(), std::move(executor),
                                      std::move(action), std::move(codec)),
      eng, std::move(ctx), tx);
}

template <class T, class Action, class Codec, class CompletionToken>
auto initiate(engine& eng, const context& ctx, transaction* tx, Action&& action, Codec codec,
              CompletionToken&& token) {
  using token_kind = awaitable_token<std::remove_cvref_t<CompletionToken>>;
  if constexpr (token_kind::value) {
    using executor = typename token_kind::executor_type;
    return execute_in_coroutine<T, executor>(eng, ctx, tx, std::decay_t<Action>(std::forward<Action>(action)),
                                             std::move(codec));
  } else {
    return initiate_with_token<T>(eng, ctx, tx, std::forward<Action>(action), std::move(codec),
                                  std::forward<CompletionToken>(token));
  }
}

}  // namespace detail::asio

// Runs `action` at most once for ctx.id, asynchronously, and completes with executed, replayed
// (decoded with `codec`) or in flight: engine::execute's semantics, see the file comment. `action`
// is a callable returning boost::asio::awaitable<T> (run as a child coroutine on the handler's
// executor) or T (run there inline). Errors — an invalid context, join_transaction,
// fingerprint_mismatch_error, store errors, what the action threw — are delivered through the
// token, never thrown from this function. `eng` must outlive the initiation; the call keeps what
// it needs of the engine afterwards, and the store must outlive it.
template <class Action, class Codec, class CompletionToken, class T = detail::asio::value_of<Action>>
  requires(!std::is_void_v<T>) && codec_for<Codec, T>
auto async_execute(engine& eng, const context& ctx, Action&& action, const Codec& codec, CompletionToken&& token) {
  return detail::asio::initiate<T>(eng, ctx, nullptr, std::forward<Action>(action), codec,
                                   std::forward<CompletionToken>(token));
}

// The same for an action that returns nothing (awaitable<void> or void): a payload::none() record
// is stored, and the completion signature is void(std::exception_ptr, idem::outcome<void>).
template <class Action, class CompletionToken>
  requires std::is_void_v<detail::asio::value_of<Action>>
auto async_execute(engine& eng, const context& ctx, Action&& action, CompletionToken&& token) {
  return detail::asio::initiate<void>(eng, ctx, nullptr, std::forward<Action>(action), detail::asio::no_codec{},
                                      std::forward<CompletionToken>(token));
}

// The same two inside the caller's transaction `tx` (engine::async_run with a transaction): with
// completion_mode::join_transaction the record is written inside `tx` and commits or rolls back
// with the action's writes; otherwise it is completed when `tx` commits and released if it rolls
// back. `tx` stays open, used by nothing but the action, until the call completed; then the caller
// commits or rolls it back.
//
//   idem::postgres_transaction tx{conn};                       // BEGIN on the caller's connection
//   auto o = co_await idem::async_execute(engine, ctx, tx, [&] { return place(conn, order); },
//                                         codec, asio::use_awaitable);
//   tx.commit();                                               // the order and its record together
//
// (idem::async_begin / async_commit below run that BEGIN and COMMIT off the coroutine's thread.)
template <class Action, class Codec, class CompletionToken, class T = detail::asio::value_of<Action>>
  requires(!std::is_void_v<T>) && codec_for<Codec, T>
auto async_execute(engine& eng, const context& ctx, transaction& tx, Action&& action, const Codec& codec,
                   CompletionToken&& token) {
  return detail::asio::initiate<T>(eng, ctx, &tx, std::forward<Action>(action), codec,
                                   std::forward<CompletionToken>(token));
}

template <class Action, class CompletionToken>
  requires std::is_void_v<detail::asio::value_of<Action>>
auto async_execute(engine& eng, const context& ctx, transaction& tx, Action&& action, CompletionToken&& token) {
  return detail::asio::initiate<void>(eng, ctx, &tx, std::forward<Action>(action), detail::asio::no_codec{},
                                      std::forward<CompletionToken>(token));
}

// idem::async_begin<Tx>(connection, token), idem::async_commit(tx, token),
// idem::async_rollback(tx, token)
//
// The steps of a transaction whose BEGIN, COMMIT and ROLLBACK block (idem::sqlite_transaction,
// idem::postgres_transaction: idem::is_blocking_transaction<Tx>), for a coroutine that hands it to
// idem::async_execute: each runs on idem's pool of threads for blocking calls and completes on the
// handler's executor, so that the coroutine's thread never waits for the database.
//
//   auto tx = co_await idem::async_begin<idem::postgres_transaction>(conn, asio::use_awaitable);
//   auto o = co_await idem::async_execute(engine, ctx, *tx, [&] { return place(conn, order); },
//                                         codec, asio::use_awaitable);
//   co_await idem::async_commit(*tx, asio::use_awaitable);   // the order and its record together
//
// async_begin completes with void(std::exception_ptr, std::unique_ptr<Tx>): a Tx constructed
// from (connection, idem::unbound), or what that constructor threw. async_commit and
// async_rollback complete with void(std::exception_ptr): what tx.commit() threw, or null
// (tx.rollback() does not throw). `tx` must live, and be used by nothing else, until they complete.
template <class Tx, class Connection, class CompletionToken>
  requires is_blocking_transaction_v<Tx> && std::is_constructible_v<Tx, const Connection&, unbound_t>
auto async_begin(Connection connection, CompletionToken&& token) {
  return detail::asio::async_step<std::unique_ptr<Tx>>(
      [connection = std::move(connection)](async_handler<std::unique_ptr<Tx>> done) {
        detail::make_blocking([connection] { return std::make_unique<Tx>(connection, unbound); }, std::move(done));
      },
      std::forward<CompletionToken>(token));
}

template <class Tx, class CompletionToken>
  requires is_blocking_transaction_v<Tx>
auto async_commit(Tx& tx, CompletionToken&& token) {
  return detail::asio::async_blocking([&tx] { tx.commit(); }, std::forward<CompletionToken>(token));
}

template <class Tx, class CompletionToken>
  requires is_blocking_transaction_v<Tx>
auto async_rollback(Tx& tx, CompletionToken&& token) {
  return detail::asio::async_blocking([&tx] { tx.rollback(); }, std::forward<CompletionToken>(token));
}

// idem::run_guarded_async<F>(engine, transactions, ctx, action)
//
// What a generated idem::guarded<C> returns for its annotated coroutine F (a method returning
// boost::asio::awaitable<T>), and idem::invoke<F> for any annotated coroutine: a coroutine that
// runs `action` (which returns F's own coroutine) at most once for `ctx` (idem::guarded_context<F>,
// computed by the wrapper before anything suspends)
// and produces its value, or on a duplicate the first value decoded by policy<F>'s codec. An
// in-flight answer is handled as idem::run_guarded handles it. For F annotated with
// transaction = "required", `transactions` (then not null) begins a transaction bound to no thread
// when the coroutine starts (transaction_source::begin_unbound), which the call takes part in as
// idem::async_execute's explicit transaction; it commits once the call produced its value and rolls
// back when it throws. A thread-bound transaction of the caller does not survive a suspension, so
// a coroutine never joins one.
template <auto F, class Action>
detail::result_of<F> run_guarded_async(engine& eng, transaction_source* transactions, context ctx, Action action) {
  using coroutine = detail::result_of<F>;
  using T = typename detail::asio::action_traits<coroutine>::value_type;
  using executor = typename coroutine::executor_type;
  return [](engine& e, transaction_source* source, context c, Action a) -> coroutine {
    std::unique_ptr<opened_transaction> opened;
    if constexpr (detail::transaction_demand_of<policy<F>>() == transaction_demand::required) {
      if (source == nullptr)
        throw configuration_error(std::string(policy<F>::function) +
                                  " is annotated with transaction = \"required\", but no idem::transaction_source "
                                  "was given to begin its transaction");
      opened = co_await detail::asio::begin_transaction<executor>(*source);
    }
    // The call, in the opened transaction when there is one, completing on the coroutine's own
    // executor type (a coroutine co_awaits only awaitables of its executor; F's may be any). The
    // transaction ends after it, committed or rolled back.
    const boost::asio::use_awaitable_t<executor> on_this_executor;
    const auto call = [&](auto&&... codec) -> boost::asio::awaitable<outcome<T>, executor> {
      if (!opened) co_return co_await async_execute(e, c, std::move(a), codec..., on_this_executor);
      std::optional<outcome<T>> result;
      std::exception_ptr failure;
      try {
        result.emplace(co_await async_execute(e, c, opened->get(), std::move(a), codec..., on_this_executor));
      } catch (...) {
        failure = std::current_exception();
      }
      co_await detail::asio::end_transaction<executor>(*opened, std::move(failure));
      co_return std::move(*result);
    };
    if constexpr (std::is_void_v<T>) {
      outcome<void> result = co_await call();
      if (const auto* busy = std::get_if<in_flight>(&result)) map_in_flight(e, c, *busy);
    } else {
      using codec = typename policy<F>::codec;
      outcome<T> result = co_await call(codec{});
      if (auto* ran = std::get_if<executed<T>>(&result)) co_return std::move(ran->value);
      if (auto* replay = std::get_if<replayed<T>>(&result)) co_return std::move(replay->value);
      detail::refuse_in_flight(e, c, std::get<in_flight>(result));
    }
  }(eng, transactions, std::move(ctx), std::move(action));
}

namespace detail {

// An argument for the parameter of type P of a coroutine that idem::invoke keeps until the
// coroutine completes. A reference parameter keeps a reference to the argument itself: one that
// would bind to a converted temporary (a `const std::string&` given a string literal) is refused,
// since that temporary would be gone before the coroutine runs.
template <class P, class Arg>
Arg&& kept_argument(Arg&& arg) noexcept {
  static_assert(!std::is_reference_v<P> ||
                    std::is_convertible_v<std::remove_reference_t<Arg>*, std::remove_reference_t<P>*>,
                "idem::invoke<F> on a coroutine: give a reference parameter an object of its own type; a converted "
                "temporary would be destroyed before the coroutine runs");
  return std::forward<Arg>(arg);
}

// idem::invoke<F> for F returning boost::asio::awaitable<T> (declared in <idem/invoke.hpp>): keeps
// the arguments as F's own coroutine would (by-value parameters owned, references referred to; the
// object of a member function referred to when it is an lvalue, owned otherwise, a pointer for
// instance), computes the context from them now, and returns run_guarded_async's coroutine.
template <auto F>
struct coroutine_invoke {
  template <class... Args>
  static result_of<F> call(engine& eng, transaction_source* transactions, Args&&... args) {
    if constexpr (std::is_member_function_pointer_v<decltype(F)>) {
      return [&]<class Object, class... Rest>(Object&& object, Rest&&... rest) {
        using kept_object = std::conditional_t<std::is_lvalue_reference_v<Object>, Object, std::remove_cvref_t<Object>>;
        return start(eng, transactions, std::tuple<kept_object>(std::forward<Object>(object)),
                     std::forward<Rest>(rest)...);
      }(std::forward<Args>(args)...);
    } else {
      return start(eng, transactions, std::tuple<>(), std::forward<Args>(args)...);
    }
  }

 private:
  template <class Object, class... Args>
  static result_of<F> start(engine& eng, transaction_source* transactions, Object object, Args&&... args) {
    using parameters = parameters_of<F>;
    static_assert(std::tuple_size_v<parameters> == sizeof...(Args),
                  "idem::invoke<F> on a coroutine: pass every argument of F (default arguments are not known here)");
    auto kept = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return parameters(kept_argument<std::tuple_element_t<I, parameters>>(std::forward<Args>(args))...);
    }(std::index_sequence_for<Args...>{});
    context ctx = std::apply([&](auto&... param) { return guarded_context<F>(eng, param...); }, kept);
    auto call = std::tuple_cat(std::move(object), std::move(kept));
    return run_guarded_async<F>(eng, transactions, std::move(ctx),
                                [call = std::move(call)]() mutable -> result_of<F> { return std::apply(F, std::move(call)); });
  }
};

}  // namespace detail

}  // namespace idem
