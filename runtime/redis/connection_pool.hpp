// runtime/redis/connection_pool.hpp — the command connections of one store.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "connection.hpp"

namespace idem::detail::redis {

// idem::detail::redis::connection_pool
//
// Up to `capacity` connections, opened on demand and reused most-recently-used first (the hot
// connection stays hot). A taken connection that the peer closed meanwhile is discarded without a
// round trip and replaced. A connection that failed is discarded together with every idle one: they
// all point at the same server, which most likely restarted. Thread-safe.
class connection_pool {
 public:
  connection_pool(endpoint where, std::size_t capacity);
  ~connection_pool();
  connection_pool(const connection_pool&) = delete;
  connection_pool& operator=(const connection_pool&) = delete;

  // A connection on loan; returned to the pool when destroyed, or discarded if it broke.
  class lease {
   public:
    lease(connection_pool& pool, std::unique_ptr<connection> conn) : pool_(&pool), conn_(std::move(conn)) {}
    lease(lease&& other) noexcept = default;
    lease& operator=(lease&&) = delete;
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    ~lease();
    connection& operator*() const noexcept { return *conn_; }
    connection* operator->() const noexcept { return conn_.get(); }

   private:
    connection_pool* pool_;
    std::unique_ptr<connection> conn_;
  };

  // Takes an idle connection or opens one; waits up to the command timeout for one to come back
  // when `capacity` are in use. Throws io_failure.
  lease take();

  const endpoint& where() const noexcept { return where_; }
  std::uint64_t opened() const noexcept { return opened_.load(std::memory_order_relaxed); }

 private:
  void give_back(std::unique_ptr<connection> conn) noexcept;

  endpoint where_;
  std::size_t capacity_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<connection>> idle_;
  std::size_t open_ = 0;  // idle + on loan + being opened
  std::atomic<std::uint64_t> opened_{0};
};

}  // namespace idem::detail::redis
