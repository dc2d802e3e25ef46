// idem/invoke.hpp — calling an annotated function through the engine.
//
// idem-annotate turns every `[[idem::idempotent(...)]]` into data: a specialisation of
// idem::policy<&C::m> (scope, options, key extraction, codec, source location) and, for classes,
// a specialisation of idem::guarded<C>. Everything that *behaves* lives here and in the engine:
//
//   idem::memory_store store;
//   idem::engine engine{store};
//   idem::invoke<&OrderListener::on>(engine, listener, event);  // a member function
//   idem::invoke<&rebuild_index>(engine, job);                   // a free or static function
//   idem::guarded<OrderListener> guarded{engine, ctor args...};  // every annotated method guarded
//
// A user who cannot run the generator may write a policy by hand: see docs/annotator.md.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include <idem/context.hpp>
#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/outcome.hpp>
#include <idem/transaction.hpp>

// Declared, not included: idem::invoke recognises a coroutine by its type, and only the generated
// header of a coroutine's policy (or the user) includes <idem/asio.hpp>, which guards its calls.
namespace boost::asio {
template <typename T, typename Executor>
class awaitable;
}  // namespace boost::asio

namespace idem {

// idem::policy<F>
//
// What idem-annotate knows about the annotated function F (`&C::m` or `&f`). Only generated (or
// hand-written) explicit specialisations exist; the primary template is never defined, so calling
// idem::invoke on a function nobody annotated fails to compile. A specialisation provides:
//
//   static constexpr std::string_view function;   // "OrderListener::on"
//   static constexpr std::string_view scope;      // "OrderListener.on"
//   static constexpr std::string_view file;       // where the attribute is
//   static constexpr unsigned line, column;
//   static call_options options();                // what the attribute set; unset = engine default
//   static std::string key(const Params&...);     // the key expression, through idem::to_key
//   using codec = C;                              // only when F returns a value
//   static constexpr transaction_demand transaction;  // only when the attribute sets it
//   static const bool registered;                 // defined in the generated .cpp
//   static P default_argument_N();                // per defaulted parameter N of a member of a
//                                                 // non-final class: what idem::guarded<C> passes
template <auto F>
struct policy;

// idem::guarded<C>
//
// Generated for each non-final class with annotated non-static methods, its own or inherited
// from annotated bases: derives from C, overrides (virtual) or hides (non-virtual) each annotated
// method with the same parameters and default arguments, keeps C's other overloads of those
// names (`using C::m;`), and routes each call through idem::run_guarded. Constructed as
// `guarded<C>{engine, C's constructor arguments...}`. The primary template is never defined.
template <class C>
class guarded;

// idem::key_value<T>
//
// What a key expression may produce: an integral value other than bool, or anything convertible
// to std::string_view (std::string, const char*, a string literal). idem-annotate checks every key
// expression against this concept at build time.
template <class T>
concept key_value = (std::integral<std::remove_cvref_t<T>> && !std::same_as<std::remove_cvref_t<T>, bool>) ||
                    std::convertible_to<const T&, std::string_view>;

// Turns a key value into the key string: integers in decimal, strings unchanged. The engine
// then checks the key's length (1..255 bytes) when it builds the context.
template <key_value T>
std::string to_key(const T& value) {
  if constexpr (std::integral<std::remove_cvref_t<T>>)
    return std::to_string(value);
  else
    return std::string(std::string_view(value));
}

namespace detail {

template <class F>
struct function_traits;
template <class R, class... A>
struct function_traits<R (*)(A...)> {
  using result = R;
  using parameters = std::tuple<A...>;
};
template <class R, class... A>
struct function_traits<R (*)(A...) noexcept> : function_traits<R (*)(A...)> {};
#define IDEM_DETAIL_MEMBER_TRAITS(QUALIFIERS)                                    \
  template <class R, class C, class... A>                                        \
  struct function_traits<R (C::*)(A...) QUALIFIERS> {                            \
    using result = R;                                                            \
    using parameters = std::tuple<A...>;                                         \
  };                                                                             \
  template <class R, class C, class... A>                                        \
  struct function_traits<R (C::*)(A...) QUALIFIERS noexcept>                     \
      : function_traits<R (C::*)(A...) QUALIFIERS> {};
IDEM_DETAIL_MEMBER_TRAITS()
IDEM_DETAIL_MEMBER_TRAITS(const)
IDEM_DETAIL_MEMBER_TRAITS(&)
IDEM_DETAIL_MEMBER_TRAITS(const&)
IDEM_DETAIL_MEMBER_TRAITS(&&)
IDEM_DETAIL_MEMBER_TRAITS(const&&)
#undef IDEM_DETAIL_MEMBER_TRAITS

// The result type of the function F points to.
template <auto F>
using result_of = typename function_traits<decltype(F)>::result;

// The parameter types of the function F points to, as a std::tuple (without the object of a member).
template <auto F>
using parameters_of = typename function_traits<decltype(F)>::parameters;

// Whether R is a coroutine idem guards asynchronously: boost::asio::awaitable<T, Executor>.
template <class R>
inline constexpr bool is_asio_coroutine = false;
template <class T, class Executor>
inline constexpr bool is_asio_coroutine<boost::asio::awaitable<T, Executor>> = true;

// How idem::invoke calls an annotated coroutine: defined in <idem/asio.hpp>, which the generated
// header of a coroutine's policy includes. Without it the type is incomplete and the call does not
// compile, rather than guard only the creation of the coroutine.
template <auto F>
struct coroutine_invoke;

// Policy's scope, checked and kept on first use: its calls then allocate nothing for it.
template <class Policy>
const static_scope& scope_of() {
  static const static_scope kept(Policy::scope);
  return kept;
}

// The context of one call under Policy: its scope, its key expression over `args`, its options.
template <class Policy, class... Args>
context context_of(engine& eng, Args&... args) {
  static_cast<void>(Policy::registered);  // links the generated registration into the program
  return eng.make_context(scope_of<Policy>(), Policy::key(args...), Policy::options());
}

// What a guarded call of a function returning R answers its caller, given the call's outcome:
// the result that ran or was replayed. An in-flight answer goes through the engine's outcome
// mapper (idem::map_in_flight, which may throw something else); if the mapper returns, a void
// function returns without running and a value-returning one throws in_flight_error. The one
// rule of the blocking and the coroutine wrappers.
template <class R>
R answer_of(const engine& eng, const context& ctx, outcome<R>& result) {
  if (const auto* busy = std::get_if<in_flight>(&result)) {
    map_in_flight(eng, ctx, *busy);
    if constexpr (!std::is_void_v<R>) throw in_flight_error(ctx.id.to_string(), busy->retry_after);
  }
  if constexpr (!std::is_void_v<R>) {
    if (auto* ran = std::get_if<executed<R>>(&result)) return std::move(ran->value);
    return std::move(std::get<replayed<R>>(result).value);
  }
}

// Runs `action` (which calls the original function) at most once per key through `eng`, with
// the settings of Policy. `args` are the call's arguments; only the key is computed from them.
// Returns the action's result, or on a duplicate the first call's result decoded by the
// policy's codec. On an in-flight answer applies the engine's outcome mapper; if the mapper
// returns, a void function returns without running and a value-returning one throws
// in_flight_error.
template <class Policy, class R, class Action, class... Args>
R run(engine& eng, Action&& action, Args&... args) {
  const context ctx = context_of<Policy>(eng, args...);
  if constexpr (std::is_void_v<R>) {
    outcome<void> result = eng.execute(ctx, action);
    return answer_of(eng, ctx, result);
  } else {
    outcome<R> result = eng.template execute<R>(ctx, action, typename Policy::codec{});
    return answer_of(eng, ctx, result);
  }
}

// What the attribute of Policy's function says about its transaction (caller when it says nothing).
template <class Policy>
constexpr transaction_demand transaction_demand_of() noexcept {
  if constexpr (requires { Policy::transaction; })
    return Policy::transaction;
  else
    return transaction_demand::caller;
}

// run(), inside the transaction Policy demands: for transaction = "required", the caller's active
// transaction, else one begun from `transactions` before anything is claimed, committed once the
// call returned (after the engine's check that it still holds its lease) and rolled back, which
// releases the record, when the call or the commit throws.
template <class Policy, class R, class Action, class... Args>
R run_demanded(engine& eng, transaction_source* transactions, Action&& action, Args&... args) {
  if constexpr (transaction_demand_of<Policy>() == transaction_demand::caller) {
    return run<Policy, R>(eng, action, args...);
  } else {
    const std::unique_ptr<opened_transaction> opened = open_unless_active(transactions, Policy::function);
    if constexpr (std::is_void_v<R>) {
      run<Policy, R>(eng, action, args...);
      if (opened) opened->commit();
    } else {
      R result = run<Policy, R>(eng, action, args...);
      if (opened) opened->commit();
      return result;
    }
  }
}

template <class... Args>
struct first_is_transaction_source : std::false_type {};
template <class First, class... Rest>
struct first_is_transaction_source<First, Rest...>
    : std::bool_constant<std::derived_from<std::remove_cvref_t<First>, transaction_source>> {};

// The class an object argument of a member call names: T for T, T*, and a smart pointer to T.
template <class T>
struct pointee {
  using type = T;
};
template <class T>
struct pointee<T*> {
  using type = T;
};
template <class T>
  requires requires { typename T::element_type; }
struct pointee<T> {
  using type = typename T::element_type;
};

// Whether `Object` is (or points to) an idem::guarded<C>, or a class derived from one: every
// generated guarded<C> declares idem_needs_transactions.
template <class Object>
concept guarded_object = requires { pointee<std::remove_cvref_t<Object>>::type::idem_needs_transactions; };

// What idem::invoke checks of the object of a member function.
template <class Object, class...>
constexpr void check_not_guarded() noexcept {
  static_assert(!guarded_object<Object>,
                "idem::invoke<F>(engine, object, ...): `object` is an idem::guarded<C>, which guards its methods "
                "itself; call the method on it directly (through invoke, a virtual F would be guarded twice and wait "
                "for its own lease)");
}

// invoke()'s work once the transaction source (null: none) is separated from the arguments.
template <auto F, class... Args>
decltype(auto) invoke_with(engine& eng, transaction_source* transactions, Args&&... args) {
  using result = result_of<F>;
  if constexpr (std::is_member_function_pointer_v<decltype(F)>) check_not_guarded<Args...>();
  if constexpr (is_asio_coroutine<result>) {
    return coroutine_invoke<F>::call(eng, transactions, std::forward<Args>(args)...);
  } else if constexpr (std::is_member_function_pointer_v<decltype(F)>) {
    return [&eng, transactions]<class Object, class... Rest>(Object&& object, Rest&&... rest) -> result {
      auto action = [&]() -> result { return std::invoke(F, std::forward<Object>(object), std::forward<Rest>(rest)...); };
      return run_demanded<policy<F>, result>(eng, transactions, action, rest...);
    }(std::forward<Args>(args)...);
  } else {
    auto action = [&]() -> result { return std::invoke(F, std::forward<Args>(args)...); };
    return run_demanded<policy<F>, result>(eng, transactions, action, args...);
  }
}

}  // namespace detail

// idem::needs_transaction_source<F...>
//
// Whether any of the annotated functions F... is annotated with transaction = "required", so that
// its wrapper needs a transaction_source to begin that transaction with. A generated
// idem::guarded<C> asks it about its methods.
template <auto... F>
inline constexpr bool needs_transaction_source =
    ((detail::transaction_demand_of<policy<F>>() == transaction_demand::required) || ...);

// idem::check_without_transaction_source<NeedsSource, Args...>()
//
// What the constructor of a generated idem::guarded<C> that is given no transaction_source
// checks (Args: its constructor arguments, which defer the check to its use): it does not compile
// when a method of C is annotated with transaction = "required" (NeedsSource).
template <bool NeedsSource, class... Args>
constexpr void check_without_transaction_source() noexcept {
  static_assert(!NeedsSource,
                "idem::guarded<C>: a method annotated with transaction = \"required\" needs the "
                "idem::transaction_source that begins its transactions: construct it as "
                "idem::guarded<C>{engine, transactions, C's constructor arguments...}");
}

// idem::run_guarded<F>(engine, transactions, action, args...)
//
// What a generated idem::guarded<C> calls for its annotated method F: runs `action` (which calls
// the original, by its qualified name) at most once per key of policy<F>, computed from `args`
// (the call's arguments), and returns its result, or on a duplicate the first result decoded by
// the policy's codec. `transactions` (may be null) begins the transaction of a method annotated
// with transaction = "required" when its caller has none active. An in-flight answer goes through
// idem::map_in_flight: if the engine's outcome mapper returns, a void function returns without
// running and a value-returning one throws in_flight_error. Throws what idem::invoke throws.
template <auto F, class Action, class... Args>
detail::result_of<F> run_guarded(engine& eng, transaction_source* transactions, Action&& action, Args&... args) {
  return detail::run_demanded<policy<F>, detail::result_of<F>>(eng, transactions, action, args...);
}

// idem::guarded_context<F>(engine, args...)
//
// The context of one call of the annotated function F with the arguments `args`: policy<F>'s
// scope, its key expression over `args`, its options. What a generated wrapper of a coroutine
// computes before anything suspends (see idem::run_guarded_async in <idem/asio.hpp>). Throws what
// engine::make_context throws.
template <auto F, class... Args>
context guarded_context(engine& eng, Args&... args) {
  return detail::context_of<policy<F>>(eng, args...);
}

// idem::invoke<F>(engine, object, args...)   (F a pointer to a non-static member function)
// idem::invoke<F>(engine, args...)           (F a pointer to a free or static member function)
// idem::invoke<F>(engine, transactions, ...)  (F annotated with transaction = "required")
//
// Calls F at most once per key (the policy's key expression over `args`) and returns its result;
// a duplicate gets the first result back through the policy's codec. The member form calls F on
// `object` the usual way (virtually, for a virtual F); an idem::guarded<C> (or a pointer to one)
// does not compile here: it guards its methods itself. A function annotated with
// transaction = "required" takes an idem::transaction_source first, which begins its transaction
// when the caller has none active.
// Throws what the engine throws (configuration_error, in_flight_error, store errors) and whatever
// F throws, after releasing the record so the call can be retried.
//
// F a coroutine (returning boost::asio::awaitable<T>; needs <idem/asio.hpp>, which its generated
// header includes): returns a coroutine of the same type that guards F's run, not only its
// creation: `co_await idem::invoke<&f>(engine, args...)` runs f at most once per key. The key is
// computed now, before anything suspends (an invalid context throws here, as it does for a
// blocking call); the arguments are kept as F's own coroutine keeps them — the ones F takes by
// value are copied or moved into the returned coroutine, the references referred to, so they must
// live until it completes; so must an object given as an lvalue (an rvalue, a pointer say, is
// moved in). See idem::run_guarded_async for in-flight answers and transactions.
template <auto F, class... Args>
decltype(auto) invoke(engine& eng, Args&&... args) {
  if constexpr (detail::transaction_demand_of<policy<F>>() == transaction_demand::caller) {
    return detail::invoke_with<F>(eng, nullptr, std::forward<Args>(args)...);
  } else if constexpr (!detail::first_is_transaction_source<Args...>::value) {
    static_assert(detail::first_is_transaction_source<Args...>::value,
                  "idem::invoke<F>: F is annotated with transaction = \"required\"; pass the idem::transaction_source "
                  "that begins its transaction first: idem::invoke<F>(engine, transactions, arguments...)");
  } else {
    return [&eng]<class Source, class... Rest>(Source&& transactions, Rest&&... rest) -> decltype(auto) {
      return detail::invoke_with<F>(eng, &transactions, std::forward<Rest>(rest)...);
    }(std::forward<Args>(args)...);
  }
}

}  // namespace idem
