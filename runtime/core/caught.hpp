// runtime/core/caught.hpp — running a step of an asynchronous call and keeping what it throws.
#pragma once

#include <exception>
#include <utility>

namespace idem::detail {

// Runs `step` and returns what it threw, or null. The catch block has ended when this returns:
// asynchronous code hands the error to a handler that may take it to another thread at once, and
// while the catching thread is still inside a catch block the two threads share the exception
// object without an ordering ThreadSanitizer can see (libstdc++'s reference counts are not
// instrumented). So an error is never handed on from inside a catch block: catch it with this.
template <class Step>
[[nodiscard]] std::exception_ptr caught(Step&& step) noexcept {
  try {
    std::forward<Step>(step)();
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace idem::detail
