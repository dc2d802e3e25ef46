// idem/detail/asio_steps.hpp — a step of idem's core that reports through a callback, as a
// Boost.Asio asynchronous operation: what <idem/asio.hpp>'s transaction steps and calls are built on.
#pragma once

#include <exception>
#include <memory>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution/executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/async.hpp>
#include <idem/transaction.hpp>

namespace idem::detail::asio {

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

}  // namespace idem::detail::asio
