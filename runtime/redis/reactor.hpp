// runtime/redis/reactor.hpp — the one thread on which a Redis store's asynchronous calls progress.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

namespace idem::detail::redis {

// idem::detail::redis::reactor
//
// One thread per store, started on first use, that runs callbacks when a socket becomes readable
// or a time comes: what an asynchronous call waits on instead of a thread of its own. A callback
// learns why it runs; each runs once, on the reactor's thread, without the reactor's lock (so it
// may register again). stop() ends the thread and then runs every callback still registered, on
// the stopping thread, with `stopped`: nothing registered is ever dropped unanswered. Thread-safe.
class reactor {
 public:
  using clock = std::chrono::steady_clock;
  enum class wake { ready, timed_out, stopped };
  using handler = std::function<void(wake)>;
  // Names one registration; 0 names none.
  using id = std::uint64_t;

  reactor();
  ~reactor();
  reactor(const reactor&) = delete;
  reactor& operator=(const reactor&) = delete;

  // Runs `h(ready)` once `fd` is readable or hung up, or `h(timed_out)` at `deadline`, whichever
  // comes first. One registration per descriptor at a time. Returns 0, keeping nothing, when the
  // reactor stopped. Throws std::system_error when the descriptor cannot be watched.
  [[nodiscard]] id when_readable(int fd, clock::time_point deadline, handler h);
  // Runs `h(timed_out)` at `at` (soon if it passed). Returns 0, keeping nothing, when stopped.
  [[nodiscard]] id at(clock::time_point when, handler h);
  // Removes a registration that has not run; returns whether it was removed (its handler is
  // destroyed outside the lock).
  bool cancel(id registration);

  // Ends the thread (after the callback running now), then runs every remaining registration with
  // `stopped`. Later registrations return 0. Idempotent; not from a callback.
  void stop();

  // 0 before the first registration, 1 while running, 0 after stop().
  [[nodiscard]] std::size_t threads() const;

 private:
  struct registration {
    handler run;
    int fd = -1;  // -1: a timer
    clock::time_point deadline;
  };
  id add_locked(int fd, clock::time_point deadline, handler h);
  void run_loop();
  void wake_thread();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  mutable std::mutex mutex_;
  std::unordered_map<id, registration> registered_;
  std::map<std::pair<clock::time_point, id>, id> deadlines_;
  clock::time_point sleeping_until_ = clock::time_point::max();
  id next_id_ = 1;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace idem::detail::redis
