// idem/engine.hpp — runs an action at most once per (scope, key) and replays its result.
//
//   idem::memory_store store;
//   idem::engine engine{store};
//   auto ctx = engine.make_context("OrderListener.on", event.id);
//   idem::outcome<void> o = engine.execute(ctx, [&] { handle(event); });
//
// The engine claims the record in the store (a duplicate waits inside the store), runs the
// action, keeps the lease alive with a heartbeat every lease/2 on the engine's few heartbeat threads,
// and records the result for replay. An action that throws releases the record and its exception
// propagates unchanged.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <idem/async.hpp>
#include <idem/codec.hpp>
#include <idem/config.hpp>
#include <idem/context.hpp>
#include <idem/function_ref.hpp>
#include <idem/errors.hpp>
#include <idem/listener.hpp>
#include <idem/log.hpp>
#include <idem/outcome.hpp>
#include <idem/store.hpp>

namespace idem {

class metrics;

// Decides what a call through idem::invoke (or a generated wrapper) answers when the record is
// held by another caller beyond its wait. The default throws in_flight_error carrying the
// holder's remaining lease. A mapper may throw something else; if it returns, a void function
// returns without running and a value-returning function throws in_flight_error.
using outcome_mapper = std::function<void(const context&, const in_flight&)>;

// Everything an engine reports to or asks of the application besides its configuration.
struct engine_hooks {
  std::vector<std::shared_ptr<lifecycle_listener>> listeners{};  // called in this order
  log_sink log = stderr_log_sink;
  outcome_mapper map_in_flight{};  // empty = throw in_flight_error
  // When set, the engine reports every call, store operation, heartbeat extend and purge to it
  // (<idem/metrics.hpp>); it may be shared by several engines.
  std::shared_ptr<idem::metrics> metrics{};
};

namespace detail {
class engine_core;
class periodic_purge;
struct policy_info;
}  // namespace detail

// What the engine's type-erased calls (engine::async_run, engine::run_at_once) answer, before
// the typed outcome<T> is made of it: the store's answer to the claim as the store wrote it, a
// duplicate or in_flight (so a replay's payload is written once, by the store, and never moved),
// or `action_ran` once the claim's action has run and its result is stored. Never
// fingerprint_mismatch: that is thrown. For adapters to event loops; outcome_of makes the outcome.
using raw_outcome = acquire_result;
// The raw_outcome of a call whose action ran.
inline constexpr acquired action_ran{};

// The caller's outcome<T> of a raw outcome: a duplicate's stored payload decoded with `codec`, an
// in-flight answer as it is, and for a call whose action ran the result it left in `value` (an
// engaged std::optional<T>). For T = void, `codec` and `value` are not looked at.
template <class T, class Codec, class Value>
outcome<T> outcome_of(raw_outcome& raw, const Codec& codec, Value& value) {
  if (auto* d = std::get_if<duplicate>(&raw)) {
    if constexpr (std::is_void_v<T>) {
      return replayed<void>{d->completed_at};
    } else {
      return replayed<T>{decode_with<T>(codec, d->value), d->completed_at};
    }
  }
  if (auto* f = std::get_if<in_flight>(&raw)) return *f;
  if constexpr (std::is_void_v<T>) {
    return executed<void>{};
  } else {
    return executed<T>{std::move(*value)};
  }
}

// An asynchronous action as engine::async_run starts it: it calls `finished` once, with what the
// action threw or null, from any thread.
using async_action = detail::small_function<void(async_done finished)>;

// idem::engine
//
// Thread-safe; one per application is typical. Not copyable or movable (the heartbeat threads
// hold a reference to it). The store must outlive the engine.
class engine {
 public:
  // Validates `settings` and every policy that generated code registered (see
  // <idem/invoke.hpp>) against the store: a join-transaction policy on a store that cannot
  // complete inside a transaction fails here, not on the first call. Throws configuration_error.
  explicit engine(store& backing_store, config settings = {}, engine_hooks hooks = {});
  ~engine();
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // Builds and validates a context for `scope` and `key`, filling unset options from the
  // configuration. Throws configuration_error for a bad scope or option and invalid_key_error for
  // a bad key (the message never contains the key).
  context make_context(std::string scope, std::string key, const call_options& options = {},
                       std::optional<std::string> fingerprint = std::nullopt) const;
  // The same under a kept scope (idem::static_scope, checked when it was made): the context refers
  // to it, so the call allocates nothing for its scope. Generated wrappers and HTTP endpoints use it.
  context make_context(static_scope scope, std::string key, const call_options& options = {},
                       std::optional<std::string> fingerprint = std::nullopt) const;

  // Runs `action` (returning T) at most once for ctx.id and returns executed, replayed (decoded
  // with `codec`) or in_flight. Throws configuration_error for a context that fails
  // ctx.validate() and for a join-transaction call without a capable store or an active
  // transaction the store can join (all before anything is acquired), fingerprint_mismatch_error,
  // store errors from try_acquire, and whatever the action throws (after releasing the record). A
  // failed completion follows the configured completion_failure_policy.
  //
  // Under an active transaction (idem::current_transaction()) the record is completed once the
  // transaction commits, and the commit first confirms the lease: a holder whose lease was lost
  // meanwhile fails the commit with lease_lost_error instead of committing its work twice. A
  // rollback releases the record. A transaction that ends inside the action is handled the same
  // way when the action returns: completed after a commit, released after a rollback.
  //
  // The value type is the action's result type (`engine.execute(ctx, action, codec)`), or the
  // explicit T of `engine.execute<T>(ctx, action, codec)`, to which the result converts.
  template <class T, class Action, class Codec>
    requires(!std::is_void_v<T>) && std::is_invocable_r_v<T, Action&> && codec_for<Codec, T>
  [[nodiscard]] outcome<T> execute(const context& ctx, Action&& action, const Codec& codec);
  template <class Action, class Codec, class T = std::remove_cvref_t<std::invoke_result_t<Action&>>>
    requires(!std::is_void_v<T>) && codec_for<Codec, T>
  [[nodiscard]] outcome<T> execute(const context& ctx, Action&& action, const Codec& codec) {
    return execute<T>(ctx, std::forward<Action>(action), codec);
  }

  // The same for an action that returns nothing: a payload::none() record is stored.
  template <class Action>
    requires std::is_void_v<std::invoke_result_t<Action&>>
  [[nodiscard]] outcome<void> execute(const context& ctx, Action&& action);

  // The asynchronous call under idem::async_execute (<idem/asio.hpp>), for adapters to event
  // loops. Claims ctx.id with store::async_try_acquire (a duplicate's wait occupies no thread;
  // `cancel`, which may be null, ends it with operation_cancelled and changes nothing stored);
  // once acquired it starts `action`, and when that finished it encodes the result with `encode`
  // and completes with store::async_complete: execute()'s semantics step for step (heartbeat,
  // listeners exactly once, release on a throw, the completion-failure policy). `done` is called
  // once, from the thread that finished the last step; an invalid context, and
  // completion_mode::join_transaction (it needs the overload below, given the transaction), are
  // reported through `done` before anything is acquired. A call may outlive the engine object
  // (it keeps what it uses, `ctx` included: pass an rvalue to spare a copy); the store must outlive
  // every call.
  void async_run(context ctx, async_action action, std::function<payload()> encode, cancellation* cancel,
                 async_handler<raw_outcome> done);
  // The same inside `tx` (a transaction bound to a thread does not survive a co_await, so an
  // asynchronous call is handed its transaction): execute()'s semantics under a transaction. With
  // completion_mode::join_transaction the store must be able to join `tx` (asked with
  // store::async_join_problem before anything is acquired) and the record is written inside it
  // (store::async_complete_in_transaction), committing or rolling back with the business writes;
  // otherwise the record is completed once `tx` commits and released if it rolls back. `tx` must
  // stay open, and be used by nothing but the call's action, until `done` ran; then the caller
  // commits or rolls it back.
  void async_run(context ctx, transaction& tx, async_action action, std::function<payload()> encode,
                 cancellation* cancel, async_handler<raw_outcome> done);

  // For adapters to event loops: async_run's call without a transaction, made on this thread when
  // it needs no wait and no I/O (the store answers at once: store::try_acquire_at_once). Then runs
  // `action` here if the claim is granted, and returns the raw outcome, throwing what execute()
  // throws; otherwise returns nullopt having done nothing, and the caller calls async_run. A
  // thread's active transaction is not looked at, as async_run does not look at it.
  [[nodiscard]] std::optional<raw_outcome> run_at_once(const context& ctx, function_ref<void()> action,
                                                       function_ref<payload()> encode);

  friend void map_in_flight(const engine& eng, const context& ctx, const in_flight& answer);

  const config& settings() const noexcept;
  store& backing_store() const noexcept { return store_; }

 private:
  raw_outcome run(const context& ctx, function_ref<void()> action, function_ref<payload()> encode);
  void check_policy(const detail::policy_info& policy) const;

  store& store_;
  std::shared_ptr<detail::engine_core> core_;
  std::unique_ptr<detail::periodic_purge> purge_;  // null when config.purge_interval is zero
};

// Applies `eng`'s outcome mapper to an in-flight answer for ctx (by default throws
// in_flight_error carrying the holder's remaining lease; the message names the record, never the
// key). idem::invoke and idem::run_guarded call it; so may hand-written code that executes
// through the engine directly.
void map_in_flight(const engine& eng, const context& ctx, const in_flight& answer);

// ---------------------------------------------------------------------------------------------
// Implementation details follow.

template <class T, class Action, class Codec>
  requires(!std::is_void_v<T>) && std::is_invocable_r_v<T, Action&> && codec_for<Codec, T>
outcome<T> engine::execute(const context& ctx, Action&& action, const Codec& codec) {
  std::optional<T> value;
  auto ran_action = [&] { value.emplace(std::invoke(action)); };
  auto encode = [&]() -> payload { return codec.encode(*value); };
  raw_outcome raw = run(ctx, ran_action, encode);
  return outcome_of<T>(raw, codec, value);
}

template <class Action>
  requires std::is_void_v<std::invoke_result_t<Action&>>
outcome<void> engine::execute(const context& ctx, Action&& action) {
  auto ran_action = [&] { std::invoke(action); };
  auto encode = []() -> payload { return payload::none(); };
  raw_outcome raw = run(ctx, ran_action, encode);
  const std::nullptr_t nothing = nullptr;
  return outcome_of<void>(raw, nothing, nothing);
}

}  // namespace idem
