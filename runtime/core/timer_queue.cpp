// runtime/core/timer_queue.cpp — one thread that runs callbacks at given times.
#include "timer_queue.hpp"

namespace idem::detail {

timer_queue::~timer_queue() { stop(); }

timer_queue::timer timer_queue::schedule(clock::time_point at, std::function<void()> callback) {
  std::lock_guard lock(mutex_);
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { run(); });
  const timer t{at, next_sequence_++};
  const bool earliest = due_.empty() || std::pair{at, t.sequence} < due_.begin()->first;
  due_.emplace(std::pair{at, t.sequence}, std::move(callback));
  if (earliest) changed_.notify_one();
  return t;
}

bool timer_queue::cancel(const timer& t) {
  if (!t) return false;
  std::function<void()> removed;  // destroyed outside the lock: it may own anything
  std::lock_guard lock(mutex_);
  auto it = due_.find(std::pair{t.at, t.sequence});
  if (it == due_.end()) return false;
  removed = std::move(it->second);
  due_.erase(it);
  return true;
}

void timer_queue::stop() {
  std::map<std::pair<clock::time_point, std::uint64_t>, std::function<void()>> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    dropped.swap(due_);
    changed_.notify_one();
  }
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // stopped from one of its own callbacks: the loop ends when it returns
  } else {
    thread_.join();
  }
}

std::size_t timer_queue::threads() const {
  std::lock_guard lock(mutex_);
  return thread_.joinable() && !stopping_ ? 1 : 0;
}

void timer_queue::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (due_.empty()) {
      changed_.wait(lock);
      continue;
    }
    auto first = due_.begin();
    // A copy: the entry may be cancelled, and its node freed, while this thread sleeps.
    const clock::time_point due = first->first.first;
    if (due > clock::now()) {
      changed_.wait_until(lock, due);
      continue;
    }
    std::function<void()> callback = std::move(first->second);
    due_.erase(first);
    lock.unlock();
    try {
      callback();
    } catch (...) {
      // The callbacks report through their own operations; the queue serves the others.
    }
    callback = nullptr;  // whatever it owns goes before the lock is taken again
    lock.lock();
  }
}

}  // namespace idem::detail
