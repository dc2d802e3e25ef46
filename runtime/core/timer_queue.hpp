// runtime/core/timer_queue.hpp — one thread that runs callbacks at given times.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace idem::detail {

// idem::detail::timer_queue
//
// What a store's asynchronous waits time out on: callbacks ordered by due time, run one after the
// other by one thread, started on the first schedule(). Callbacks run without the queue's lock, so
// they may schedule and cancel. Destroying the queue stops the thread after the callback running
// now (if any); callbacks not yet due are dropped, not run. Thread-safe.
class timer_queue {
 public:
  using clock = std::chrono::steady_clock;
  // Names one scheduled callback.
  struct timer {
    clock::time_point at{};
    std::uint64_t sequence = 0;  // 0: no timer
    explicit operator bool() const noexcept { return sequence != 0; }
  };

  timer_queue() = default;
  ~timer_queue();
  timer_queue(const timer_queue&) = delete;
  timer_queue& operator=(const timer_queue&) = delete;

  // Runs `callback` on the queue's thread at `at` (at once if it passed). Throws std::system_error
  // if the thread cannot start.
  timer schedule(clock::time_point at, std::function<void()> callback);
  // Removes a callback that has not started; returns whether it was removed.
  bool cancel(const timer& t);
  // Stops the thread (see the destructor). Idempotent.
  void stop();

  // 0 before the first schedule(), then 1 until stop().
  std::size_t threads() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<clock::time_point, std::uint64_t>, std::function<void()>> due_;
  std::uint64_t next_sequence_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace idem::detail
