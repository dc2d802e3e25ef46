// runtime/redis/connection_pool.cpp — the command connections of one store.
#include "connection_pool.hpp"

#include <string>
#include <utility>

namespace idem::detail::redis {

connection_pool::connection_pool(endpoint where, std::size_t capacity)
    : where_(std::move(where)), capacity_(capacity) {}

connection_pool::~connection_pool() = default;

connection_pool::lease::~lease() {
  if (conn_ != nullptr) pool_->give_back(std::move(conn_));
}

connection_pool::lease connection_pool::take() {
  const auto deadline = std::chrono::steady_clock::now() + where_.command_timeout;
  std::unique_lock lock(mutex_);
  for (;;) {
    while (!idle_.empty()) {
      std::unique_ptr<connection> conn = std::move(idle_.back());
      idle_.pop_back();
      lock.unlock();  // the liveness probe is a syscall: not under the lock
      if (conn->alive()) return lease(*this, std::move(conn));
      conn.reset();
      lock.lock();
      --open_;
    }
    if (open_ < capacity_) {
      ++open_;
      lock.unlock();
      try {
        auto conn = std::make_unique<connection>(where_);
        opened_.fetch_add(1, std::memory_order_relaxed);
        return lease(*this, std::move(conn));
      } catch (...) {
        lock.lock();
        --open_;
        returned_.notify_one();
        throw;
      }
    }
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() && open_ >= capacity_) {
      throw io_failure("all " + std::to_string(capacity_) + " connections to " + where_.describe() +
                       " stayed busy for the command timeout of " +
                       std::to_string(where_.command_timeout.count()) + " ms");
    }
  }
}

void connection_pool::give_back(std::unique_ptr<connection> conn) noexcept {
  std::vector<std::unique_ptr<connection>> doomed;
  bool broken = false;
  {
    std::lock_guard lock(mutex_);
    broken = conn->broken();
    if (broken) {
      doomed.push_back(std::move(conn));
      doomed.insert(doomed.end(), std::make_move_iterator(idle_.begin()), std::make_move_iterator(idle_.end()));
      open_ -= doomed.size();
      idle_.clear();
    } else {
      idle_.push_back(std::move(conn));
    }
  }
  if (broken) {
    returned_.notify_all();  // several slots may have freed up
  } else {
    returned_.notify_one();
  }
  // `doomed` closes its connections here, outside the lock.
}

}  // namespace idem::detail::redis
