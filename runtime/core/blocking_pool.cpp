// runtime/core/blocking_pool.cpp — a few threads that run blocking store calls for asynchronous callers.
#include "blocking_pool.hpp"

#include "caught.hpp"

#include <utility>

namespace idem::detail {

blocking_pool::blocking_pool(std::size_t max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}

blocking_pool::~blocking_pool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void blocking_pool::post(std::function<void()> task) {
  std::lock_guard lock(mutex_);
  tasks_.push_back(std::move(task));
  // Each idle thread takes one queued task; the ones beyond need a thread of their own (a task
  // may block for as long as a duplicate waits).
  if (tasks_.size() > idle_ && threads_.size() < max_threads_) {
    try {
      threads_.emplace_back([this] { run(); });
    } catch (...) {
      if (threads_.empty()) {
        tasks_.pop_back();
        throw;
      }
    }
  }
  queued_.notify_one();
}

std::size_t blocking_pool::threads() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
}

blocking_pool& blocking_pool::shared() {
  // Never destroyed: its threads end with the process. Joining them during static destruction
  // would race with other libraries' exit-time cleanup (OpenSSL's drops the per-thread state its
  // calls on these threads allocated, which LeakSanitizer then reports).
  static blocking_pool* const pool = new blocking_pool(32);
  return *pool;
}

void blocking_pool::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (tasks_.empty()) {
      if (stopping_) return;
      ++idle_;
      queued_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      --idle_;
      continue;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (...) {
      // Tasks report through their own handlers.
    }
    task = nullptr;
    lock.lock();
  }
}

void blocking_pool::run_and_report(std::function<void()> operation, std::function<void(std::exception_ptr)> done) {
  post([operation = std::move(operation), done = std::move(done)] { done(caught(operation)); });
}

}  // namespace idem::detail
