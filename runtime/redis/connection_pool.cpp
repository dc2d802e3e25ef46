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

connection_pool::connection_pool(endpoint where, std::size_t capacity)
    : where_(std::move(where)), capacity_(capacity) {}

connection_pool::~connection_pool() = default;

std::shared_ptr<multiplexed_connection> connection_pool::take() {
  for (;;) {
    std::shared_ptr<multiplexed_connection> conn;
    {
      std::lock_guard lock(mutex_);
      conn = pick_locked();
    }
    if (conn->usable(idle_check_after)) return conn;
    // The server closed it (most likely it restarted): drop it and pick again.
    std::lock_guard lock(mutex_);
    std::erase(open_, conn);
  }
}

std::shared_ptr<multiplexed_connection> connection_pool::pick_locked() {
  std::erase_if(open_, [](const auto& c) { return c->broken(); });
  for (const auto& c : open_) {
    if (c->in_flight() == 0) return c;
  }
  if (open_.size() < capacity_) {
    auto conn = std::make_shared<multiplexed_connection>(where_);  // throws io_failure
    opened_.fetch_add(1, std::memory_order_relaxed);
    open_.push_back(conn);
    return conn;
  }
  // All `capacity_` are busy: pipeline on the least busy, and behind a blocking command (WAIT)
  // only when every connection has one.
  auto load = [](const auto& c) { return std::pair(c->blocking_in_flight() > 0, c->in_flight()); };
  return *std::min_element(open_.begin(), open_.end(), [&](const auto& a, const auto& b) { return load(a) < load(b); });
}

}  // namespace idem::detail::redis
