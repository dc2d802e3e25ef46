// runtime/redis/connection_pool.cpp — the command connections of one store.
#include "connection_pool.hpp"

#include "../core/blocking_pool.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

namespace idem::detail::redis {
namespace {

// A connection idle for this long is checked (a non-blocking peek, no round trip) before it is
// used again: long enough that a connection in steady use is never checked, far shorter than a
// Redis restart, which is what the check is for.
constexpr std::chrono::milliseconds idle_check_after{1};

}  // namespace

connection_pool::connection_pool(endpoint where, std::size_t capacity, store_loop& loop)
    : where_(std::move(where)), capacity_(capacity), loop_(loop) {}

connection_pool::~connection_pool() = default;

std::shared_ptr<multiplexed_connection> connection_pool::least_busy_locked() {
  std::erase_if(open_, [](const auto& c) { return c->broken(); });
  if (open_.empty()) return nullptr;
  // Behind a blocking command (WAIT) only when every connection has one.
  auto load = [](const auto& c) { return std::pair(c->blocking_in_flight() > 0, c->in_flight()); };
  return *std::min_element(open_.begin(), open_.end(), [&](const auto& a, const auto& b) { return load(a) < load(b); });
}

std::shared_ptr<multiplexed_connection> connection_pool::pick_locked() {
  std::shared_ptr<multiplexed_connection> conn = least_busy_locked();
  if (conn != nullptr && conn->in_flight() == 0) return conn;
  // All `capacity_` are busy (or being opened): pipeline on the least busy.
  if (open_.size() + opening_ < capacity_) return nullptr;
  return conn;
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

std::shared_ptr<multiplexed_connection> connection_pool::take_open() {
  for (;;) {
    std::shared_ptr<multiplexed_connection> conn;
    {
      std::lock_guard lock(mutex_);
      conn = least_busy_locked();
    }
    if (conn == nullptr || conn->usable(idle_check_after)) return conn;
    std::lock_guard lock(mutex_);
    std::erase(open_, conn);  // the server closed it: pick again
  }
}

void connection_pool::async_take(take_handler done) {
  for (;;) {
    if (auto conn = take_open()) {
      done(std::move(conn), nullptr);
      return;
    }
    std::lock_guard lock(mutex_);
    if (least_busy_locked() != nullptr) continue;  // opened meanwhile: take it
    awaiting_open_.push_back(std::move(done));
    if (awaiting_open_.size() > 1) return;  // the first caller's task opens it
    break;
  }
  try {
    detail::blocking_pool::shared().post([this] { open_for_awaiting(); });
  } catch (const std::exception& e) {
    std::vector<take_handler> waiting;
    {
      std::lock_guard lock(mutex_);
      waiting.swap(awaiting_open_);
    }
    const io_failure failure(std::string("cannot open a connection: ") + e.what());
    for (take_handler& h : waiting) h(nullptr, &failure);
  }
}

void connection_pool::open_for_awaiting() {
  std::shared_ptr<multiplexed_connection> conn;
  std::optional<io_failure> failure;
  {
    std::lock_guard lock(mutex_);
    ++opening_;
  }
  try {
    conn = std::make_shared<multiplexed_connection>(where_, loop_);
    opened_.fetch_add(1, std::memory_order_relaxed);
  } catch (const io_failure& e) {
    failure = e;
  } catch (const std::exception& e) {
    failure.emplace(std::string("cannot open a connection: ") + e.what());
  }
  std::vector<take_handler> waiting;
  {
    std::lock_guard lock(mutex_);
    --opening_;
    if (conn != nullptr) open_.push_back(conn);
    waiting.swap(awaiting_open_);
    opened_or_failed_.notify_all();
  }
  for (take_handler& h : waiting) h(conn, failure ? &*failure : nullptr);
}

}  // namespace idem::detail::redis
