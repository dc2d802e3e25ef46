// runtime/postgres/connection_pool.cpp — a bounded, thread-safe pool of libpq connections.
#include "connection_pool.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "../core/blocking_pool.hpp"
#include "../core/caught.hpp"

namespace idem::detail::pg {

connection_pool::checkout::checkout(connection_pool& pool, std::unique_ptr<pooled_connection> connection) noexcept
    : pool_(&pool), connection_(std::move(connection)) {}

connection_pool::checkout::checkout(checkout&& other) noexcept
    : pool_(other.pool_), connection_(std::move(other.connection_)), broken_(other.broken_) {}

connection_pool::checkout::~checkout() {
  if (connection_) pool_->give_back(std::move(connection_), broken_);
}

connection_pool::connection_pool(connect_params params, std::size_t size, std::atomic<std::uint64_t>* opened)
    : params_(std::move(params)), size_(size), opened_(opened) {}

connection_pool::~connection_pool() = default;

std::unique_ptr<pooled_connection> connection_pool::take_idle(std::unique_lock<std::mutex>& lock) {
  while (!idle_.empty()) {
    std::unique_ptr<pooled_connection> candidate = std::move(idle_.back());
    idle_.pop_back();
    // The liveness check reads the socket without blocking; do it outside the lock.
    lock.unlock();
    const bool alive = idle_connection_alive(candidate->conn.get());
    if (!alive) candidate.reset();
    lock.lock();
    if (alive) return candidate;
    --open_;
  }
  return nullptr;
}

connection_pool::checkout connection_pool::acquire(steady::time_point deadline) {
  std::unique_lock lock{mutex_};
  for (;;) {
    if (auto idle = take_idle(lock)) return checkout(*this, std::move(idle));
    if (open_ < size_) {
      ++open_;
      lock.unlock();
      try {
        auto fresh = std::make_unique<pooled_connection>();
        fresh->conn = params_.connect(deadline);
        if (opened_ != nullptr) opened_->fetch_add(1, std::memory_order_relaxed);
        return checkout(*this, std::move(fresh));
      } catch (...) {
        lock.lock();
        --open_;
        returned_.notify_one();
        throw;
      }
    }
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() && open_ >= size_)
      throw busy_error();
  }
}

pg_error connection_pool::busy_error() const {
  return pg_error(failure::timeout, fmt::format("all {} connections of the pool stayed busy until the deadline", size_));
}

void connection_pool::async_acquire(steady::time_point deadline, event_loop& loop, checkout_handler done) {
  std::unique_lock lock{mutex_};
  if (stopped_) {
    const std::exception_ptr why = stopped_;
    lock.unlock();
    done(why, nullptr);
    return;
  }
  if (auto idle = take_idle(lock)) {
    lock.unlock();
    done(nullptr, std::make_shared<checkout>(checkout(*this, std::move(idle))));
    return;
  }
  if (open_ < size_) {
    ++open_;
    ++opening_async_;
    lock.unlock();
    open_for(deadline, std::move(done));
    return;
  }
  const std::uint64_t name = next_queued_++;
  queue_.push_back(queued{name, std::move(done), deadline, &loop, 0});
  lock.unlock();
  // Until the deadline; a connection given back first serves the oldest caller and drops its timer.
  const event_loop::id timer = loop.at(deadline, [this, name](event_loop::wake) { expire(name); });
  lock.lock();
  auto it = std::find_if(queue_.begin(), queue_.end(), [name](const queued& q) { return q.name == name; });
  if (it == queue_.end()) {  // served already
    lock.unlock();
    if (timer != 0) loop.cancel(timer);
    return;
  }
  if (timer != 0) {
    it->timer = timer;
    return;
  }
  checkout_handler unserved = std::move(it->done);  // the loop takes nothing any more
  queue_.erase(it);
  lock.unlock();
  unserved(std::make_exception_ptr(pg_error(failure::connect_failed, "the store is shutting down")), nullptr);
}

void connection_pool::expire(std::uint64_t name) {
  checkout_handler unserved;
  {
    std::lock_guard lock{mutex_};
    auto it = std::find_if(queue_.begin(), queue_.end(), [name](const queued& q) { return q.name == name; });
    if (it == queue_.end()) return;  // served meanwhile
    unserved = std::move(it->done);
    queue_.erase(it);
  }
  unserved(std::make_exception_ptr(busy_error()), nullptr);
}

void connection_pool::open_for(steady::time_point deadline, checkout_handler done) {
  auto opened = [this](const std::exception_ptr& error) {
    std::lock_guard lock{mutex_};
    if (error) {
      --open_;
      returned_.notify_one();
    }
    if (--opening_async_ == 0) opened_async_.notify_all();
  };
  std::exception_ptr not_posted = detail::caught([&] {
    blocking_pool::shared().post([this, deadline, done, opened]() {
      std::exception_ptr error;
      std::shared_ptr<checkout> fresh_checkout;
      try {
        auto fresh = std::make_unique<pooled_connection>();
        fresh->conn = params_.connect(deadline);
        if (opened_ != nullptr) opened_->fetch_add(1, std::memory_order_relaxed);
        fresh_checkout = std::make_shared<checkout>(checkout(*this, std::move(fresh)));
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard lock{mutex_};
        if (stopped_ && !error) error = stopped_;
      }
      if (error && fresh_checkout) {
        fresh_checkout.reset();  // back to the pool: the caller is answered `stopped_`
        opened(nullptr);
      } else {
        opened(error);
      }
      try {
        done(error, std::move(fresh_checkout));
      } catch (...) {
        // The caller reports through its own operation.
      }
    });
  });
  if (not_posted) {
    opened(not_posted);
    done(std::move(not_posted), nullptr);
  }
}

void connection_pool::stop_async(std::exception_ptr why) {
  std::deque<queued> left;
  {
    std::lock_guard lock{mutex_};
    stopped_ = why;
    left.swap(queue_);
  }
  for (queued& q : left) {
    if (q.timer != 0) q.loop->cancel(q.timer);
    try {
      q.done(why, nullptr);
    } catch (...) {
      // The caller reports through its own operation.
    }
  }
  std::unique_lock lock{mutex_};
  opened_async_.wait(lock, [this] { return opening_async_ == 0; });
}

void connection_pool::give_back(std::unique_ptr<pooled_connection> connection, bool broken) noexcept {
  const bool keep = !broken && PQstatus(connection->conn.get()) == CONNECTION_OK &&
                    PQtransactionStatus(connection->conn.get()) == PQTRANS_IDLE;
  if (!keep) connection.reset();  // closes the connection outside the lock
  std::unique_lock lock{mutex_};
  if (!queue_.empty()) {
    // An asynchronous caller waits: hand it this connection, or open one in place of a closed one.
    queued next = std::move(queue_.front());
    queue_.pop_front();
    if (!keep) ++opening_async_;  // open_ stays: the closed one's slot goes to the new one
    lock.unlock();
    if (next.timer != 0) next.loop->cancel(next.timer);
    try {
      if (keep) {
        next.done(nullptr, std::make_shared<checkout>(checkout(*this, std::move(connection))));
      } else {
        open_for(next.deadline, std::move(next.done));
      }
    } catch (...) {
      // The caller reports through its own operation.
    }
    return;
  }
  if (keep) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;
  }
  returned_.notify_one();
}

}  // namespace idem::detail::pg
