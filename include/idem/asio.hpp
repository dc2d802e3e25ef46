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

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/asio_event_loop.hpp>
#include <idem/codec.hpp>
#include <idem/context.hpp>
#include <idem/detail/asio_call.hpp>
#include <idem/detail/asio_steps.hpp>
#include <idem/engine.hpp>
#include <idem/invoke.hpp>
#include <idem/outcome.hpp>
#include <idem/transaction.hpp>

namespace idem {

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
    if constexpr (detail::transaction_demand_of<policy<F>>() == transaction_demand::required)
      opened = co_await detail::asio::begin_transaction<executor>(detail::required_source(source, policy<F>::function));
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
      detail::answer_of(e, c, result);
    } else {
      outcome<T> result = co_await call(typename policy<F>::codec{});
      co_return detail::answer_of(e, c, result);
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
