// runtime/core/blocking_pool.hpp — a few threads that run blocking store calls for asynchronous callers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace idem::detail {

// idem::detail::blocking_pool
//
// What the default asynchronous operations of idem::store run on: a fixed set of at most
// `max_threads` threads, started as work arrives, taking tasks in order. A caller's thread never
// blocks on the store; a task beyond max_threads waits in the queue. Destroying the pool runs the
// tasks queued and joins the threads. Thread-safe.
class blocking_pool {
 public:
  explicit blocking_pool(std::size_t max_threads);
  ~blocking_pool();
  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  // Queues `task`. Throws std::system_error when no thread exists and none can start.
  void post(std::function<void()> task);
  std::size_t threads() const;

  // The process's pool for stores without asynchronous operations of their own: at most 32
  // threads, since a duplicate's wait occupies one for as long as it waits. Never destroyed.
  static blocking_pool& shared();

  // Queues `operation` (a blocking store call) and reports how it ended to `done` (null: it
  // returned), from the pool's thread. The error is handed over by move, so that the caller's
  // side holds its last reference. Throws like post().
  void run_and_report(std::function<void()> operation, std::function<void(std::exception_ptr)> done);

 private:
  void run();

  const std::size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace idem::detail
