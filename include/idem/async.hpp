// idem/async.hpp — what asynchronous calls into a store or an engine are made of, without any
// event loop: completion handlers and a cancellation request. <idem/asio.hpp> adapts them to
// Boost.Asio's completion tokens; another event loop can be adapted the same way.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include <idem/detail/small_function.hpp>

namespace idem {

// Called exactly once with the error (then the value is a placeholder) or with the value. Built
// from any copyable callable, like std::function, but one of up to 48 bytes (a lambda capturing a
// std::shared_ptr and a few more words) is kept in place: no allocation per step of a call.
template <class T>
using async_handler = detail::small_function<void(std::exception_ptr, T)>;
// The same for an operation without a value.
using async_done = detail::small_function<void(std::exception_ptr)>;

// idem::cancellation
//
// A caller's request that an asynchronous operation end early. The operation installs what to do
// while it can end early (a duplicate waiting for its holder) and clears it when it can no longer;
// the caller calls request(). An operation that ends because of it reports operation_cancelled.
// Thread-safe; outlives the operation it is handed to.
class cancellation {
 public:
  cancellation() = default;
  cancellation(const cancellation&) = delete;
  cancellation& operator=(const cancellation&) = delete;

  // Caller side: runs the installed handler once, on this thread (later requests do nothing);
  // with none installed, the request is remembered for the next install().
  void request();
  bool requested() const;

  // Operation side: installs `on_request`. Returns false without installing when a request came
  // already (the operation ends at once instead).
  [[nodiscard]] bool install(std::function<void()> on_request);
  // After it returns the installed handler will not run, and is not running unless clear() was
  // called from the handler itself. Never call it while holding a lock that the handler takes.
  void clear();

 private:
  mutable std::mutex mutex_;
  std::condition_variable finished_;  // the handler returned
  std::function<void()> handler_;
  std::thread::id runner_;            // the thread running the handler, if one is
  bool requested_ = false;
};

// What an asynchronous operation that ended because its cancellation was requested reports. Not an
// idem::error: nothing went wrong. <idem/asio.hpp> turns it into operation_aborted.
class operation_cancelled : public std::exception {
 public:
  const char* what() const noexcept override { return "the operation was cancelled"; }
};

}  // namespace idem
