// idem/detail/asio_call.hpp — one guarded call of idem::async_execute (<idem/asio.hpp>): its
// steps, the operation a completion token completes, and the coroutine a use_awaitable caller
// awaits.
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
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <idem/codec.hpp>
#include <idem/detail/asio_steps.hpp>
#include <idem/detail/recycled.hpp>
#include <idem/engine.hpp>
#include <idem/invoke.hpp>
#include <idem/outcome.hpp>

namespace idem::detail::asio {

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
    async_handler<raw_outcome> done = [self = self()](std::exception_ptr error, raw_outcome raw) {
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
  std::pair<std::exception_ptr, outcome<T>> decoded(std::exception_ptr error, raw_outcome raw) {
    std::optional<outcome<T>> result;
    if (!error) {
      try {
        result.emplace(outcome_of<T>(raw, codec_, value_));
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

  void finish(std::exception_ptr error, raw_outcome raw) {
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

  void finish(std::exception_ptr error, raw_outcome raw) {
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
  std::optional<raw_outcome> raw = eng.run_at_once(ctx, run, encode);
  if (!raw) return std::nullopt;
  return outcome_of<T>(*raw, codec, value);
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

}  // namespace idem::detail::asio
