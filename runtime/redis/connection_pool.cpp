// runtime/redis/connection_pool.cpp — the command connections of one store.
#include "connection_pool.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace idem::detail::redis {
namespace {

// A connection idle for this long is checked (a non-blocking peek, no round trip) before it is
// used again: long enough that a connection in steady use is never checked, far shorter than a
// Redis restart, which is what the check is for.
constexpr std::chrono::milliseconds idle_check_after{1};

}  // namespace

connection_pool::connection_pool(endpoint where, std::size_t capacity, reactor& loop)
    : where_(std::move(where)), capacity_(capacity), loop_(loop) {}

connection_pool::~connection_pool() = default;

std::shared_ptr<multiplexed_connection> connection_pool::pick_locked() {
  std::erase_if(open_, [](const auto& c) { return c->broken(); });
  for (const auto& c : open_) {
    if (c->in_flight() == 0) return c;
  }
  if (open_.empty() || open_.size() + opening_ < capacity_) return nullptr;
  // All `capacity_` are busy (or being opened): pipeline on the least busy, and behind a
  // blocking command (WAIT) only when every connection has one.
  auto load = [](const auto& c) { return std::pair(c->blocking_in_flight() > 0, c->in_flight()); };
  return *std::min_element(open_.begin(), open_.end(), [&](const auto& a, const auto& b) { return load(a) < load(b); });
}

std::shared_ptr<multiplexed_connection> connection_pool::take() {
  std::unique_lock lock(mutex_);
  for (;;) {
    std::shared_ptr<multiplexed_connection> conn = pick_locked();
    if (conn == nullptr && open_.size() + opening_ < capacity_) {
      // Connect outside the lock: callers that find a connection meanwhile are not held up.
      ++opening_;
      lock.unlock();
      try {
        conn = std::make_shared<multiplexed_connection>(where_, loop_);  // throws io_failure
      } catch (...) {
        lock.lock();
        --opening_;
        opened_or_failed_.notify_all();
        throw;
      }
      opened_.fetch_add(1, std::memory_order_relaxed);
      lock.lock();
      --opening_;
      open_.push_back(conn);
      opened_or_failed_.notify_all();
      return conn;  // fresh: nothing to check
    }
    if (conn == nullptr) {
      // Every connection there may be is still being opened: wait for one (the opener tells
      // success and failure alike, within its connect timeout), then pick again.
      opened_or_failed_.wait_for(lock, where_.connect_timeout);
      continue;
    }
    lock.unlock();
    if (conn->usable(idle_check_after)) return conn;
    // The server closed it (most likely it restarted): drop it and pick again.
    lock.lock();
    std::erase(open_, conn);
  }
}

std::shared_ptr<multiplexed_connection> connection_pool::take_open() noexcept {
  std::shared_ptr<multiplexed_connection> conn;
  {
    std::lock_guard lock(mutex_);
    // A connection take() would open instead of sharing a busy one is left to take().
    conn = pick_locked();
  }
  if (conn != nullptr && conn->usable(idle_check_after)) return conn;
  return nullptr;  // take() drops it and opens another
}

}  // namespace idem::detail::redis
