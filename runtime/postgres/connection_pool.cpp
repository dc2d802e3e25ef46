// runtime/postgres/connection_pool.cpp — a bounded, thread-safe pool of libpq connections.
#include "connection_pool.hpp"

#include <fmt/format.h>

#include <utility>

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

connection_pool::checkout connection_pool::acquire(steady::time_point deadline) {
  std::unique_lock lock{mutex_};
  for (;;) {
    while (!idle_.empty()) {
      std::unique_ptr<pooled_connection> candidate = std::move(idle_.back());
      idle_.pop_back();
      // The liveness check reads the socket without blocking; do it outside the lock.
      lock.unlock();
      const bool alive = idle_connection_alive(candidate->conn.get());
      if (alive) return checkout(*this, std::move(candidate));
      candidate.reset();
      lock.lock();
      --open_;
    }
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
      throw pg_error(failure::timeout,
                     fmt::format("all {} connections of the pool stayed busy until the deadline", size_));
  }
}

void connection_pool::give_back(std::unique_ptr<pooled_connection> connection, bool broken) noexcept {
  const bool keep = !broken && PQstatus(connection->conn.get()) == CONNECTION_OK &&
                    PQtransactionStatus(connection->conn.get()) == PQTRANS_IDLE;
  if (!keep) connection.reset();  // closes the connection outside the lock
  std::lock_guard lock{mutex_};
  if (keep) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;
  }
  returned_.notify_one();
}

}  // namespace idem::detail::pg
