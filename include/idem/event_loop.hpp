// idem/event_loop.hpp — what a store's asynchronous calls wait on: a socket becoming readable (or
// writable) or a time coming. A store runs its own loop on a thread of its own unless it is handed the caller's
// (idem::asio::event_loop runs on a Boost.Asio io_context); then its replies are read on the
// caller's threads, with no hop between threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace idem {

// idem::event_loop
//
// An interface a store calls from any thread. Each registration's handler runs once, on a thread
// of the loop, never from inside the call that registered it, and learns why it runs. A handler
// must not block. An implementation must outlive every store that uses it.
class event_loop {
 public:
  using clock = std::chrono::steady_clock;
  enum class wake {
    ready,      // the descriptor is readable (or hung up)
    timed_out,  // the time came
    stopped,    // the loop ended with the registration pending
  };
  using handler = std::function<void(wake)>;
  // What read_some reports: why it runs and, when `ready`, the bytes read into the buffer (0: the
  // peer closed the connection) or the errno of a failed read (then bytes is 0).
  using read_handler = std::function<void(wake, std::size_t bytes, int error)>;
  // Names one registration; 0 names none.
  using id = std::uint64_t;

  virtual ~event_loop() = default;

  // Reads what the non-blocking or blocking socket `fd` has into `buffer` once it has something
  // (at once when it has already), then runs `h(ready, bytes, error)`; or `h(timed_out, 0, 0)` at
  // `deadline`, whichever comes first (the deadline may be noticed up to 50 ms late: it bounds a
  // round trip), and then nothing is read into `buffer` any more. `buffer` must live until `h`
  // runs. At most one read per descriptor at a time. Returns 0, keeping nothing, when the loop
  // cannot take registrations any more. Throws std::system_error when `fd` cannot be watched.
  [[nodiscard]] virtual id read_some(int fd, std::span<char> buffer, clock::time_point deadline, read_handler h) = 0;
  // What when_ready waits for.
  enum class readiness { readable, writable };
  // Runs `h(ready)` once `fd` is readable (or hung up), or writable, as asked; or `h(timed_out)` at
  // `deadline` (noticed up to 50 ms late, like a read's), whichever comes first. Reads nothing: for
  // a client library that reads its own socket (libpq). At most one registration per descriptor
  // at a time, of either kind. Returns 0 when stopped; throws std::system_error when `fd` cannot
  // be watched.
  [[nodiscard]] virtual id when_ready(int fd, readiness what, clock::time_point deadline, handler h) = 0;
  // Runs `h(timed_out)` at `when` (soon if it passed). Returns 0, keeping nothing, when stopped.
  [[nodiscard]] virtual id at(clock::time_point when, handler h) = 0;
  // Removes a registration whose handler has not started (a read then reads nothing more into its
  // buffer); returns whether it was removed.
  virtual bool cancel(id registration) = 0;
  // `fd` is about to be closed (no registration of it is pending): the loop lets go of it, so that
  // a descriptor opened later under the same number starts afresh.
  virtual void forget(int fd) = 0;
};

}  // namespace idem
