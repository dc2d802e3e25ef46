// runtime/core/reactor.hpp — the one thread on which a store's asynchronous calls progress (Redis,
// PostgreSQL) when it is not handed the caller's event loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include <idem/event_loop.hpp>

namespace idem::detail {

// idem::detail::reactor
//
// A store's own event loop (when it is not handed the caller's): one thread, started on first
// use, on epoll. Callbacks run without the reactor's lock (so they may register again). stop()
// ends the thread and then runs every callback still registered, on the stopping thread, with
// `stopped`. Its thread holds the reactor until it ends, so the last owner may let go of it on
// that thread. Create it with std::make_shared. Thread-safe.
class reactor final : public event_loop, public std::enable_shared_from_this<reactor> {
 public:
  reactor();
  ~reactor() override;
  reactor(const reactor&) = delete;
  reactor& operator=(const reactor&) = delete;

  [[nodiscard]] id read_some(int fd, std::span<char> buffer, clock::time_point deadline, read_handler h) override;
  [[nodiscard]] id when_ready(int fd, readiness what, clock::time_point deadline, handler h) override;
  [[nodiscard]] id at(clock::time_point when, handler h) override;
  bool cancel(id registration) override;
  void forget(int fd) override;

  // Ends the thread (after the callback running now), then runs every remaining registration with
  // `stopped`. Later registrations return 0. Idempotent; from one of its callbacks, the thread
  // ends once that callback returns.
  void stop();

  // 0 before the first registration, 1 while running, 0 after stop().
  [[nodiscard]] std::size_t threads() const;

 private:
  // What a registration of a descriptor waits for: bytes read into its buffer, or a readiness.
  enum class watch { read, readable, writable };
  struct registration {
    read_handler run;
    int fd = -1;  // -1: a timer
    watch what = watch::read;
    std::span<char> buffer;
    clock::time_point deadline;
  };
  id add_locked(int fd, watch what, std::span<char> buffer, clock::time_point deadline, read_handler h);
  // Arms the one-shot readiness report of `fd` for registration `name`.
  void arm_locked(int fd, watch what, id name);
  // Removes a registration from both indexes (its handler must have been moved out or be dropped).
  void forget_locked(std::unordered_map<id, registration>::iterator it);
  void run_loop();
  void wake_thread();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  mutable std::mutex mutex_;
  std::unordered_map<id, registration> registered_;
  std::map<std::pair<clock::time_point, id>, id> deadlines_;
  std::size_t descriptors_ = 0;  // registrations that watch a descriptor
  clock::time_point last_descriptor_{};  // when the thread last slept with one registered
  clock::time_point sleeping_until_ = clock::time_point::max();
  id next_id_ = 1;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace idem::detail
