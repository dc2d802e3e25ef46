// idem/function_ref.hpp — idem::function_ref, a non-owning reference to a callable: C++26's
// std::function_ref, as far as idem needs it. The engine's type-erased entry points take it
// (engine::run_at_once, http::endpoint::run), so a call hands its lambdas over without allocating.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace idem {

template <class Signature>
class function_ref;

// function_ref<R(Args...)>
//
// Refers to a callable it does not own, which must outlive every call through it (a function
// parameter: the lambda of the caller's expression). Copyable, two pointers, never empty.

template <class R, class... Args>
class function_ref<R(Args...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, function_ref> && std::is_invocable_r_v<R, F&, Args...>)
  function_ref(F&& f) noexcept  // NOLINT: implicit by design, like std::function_ref
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return std::invoke(*static_cast<std::remove_reference_t<F>*>(object), std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace idem
