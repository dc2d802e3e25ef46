// runtime/postgres/connection_pool.hpp — a bounded, thread-safe pool of libpq connections.
//
// Connections open lazily, up to the pool size. A checkout hands one connection to one thread; a
// connection that broke, timed out or was left inside a transaction is closed when it comes back,
// and the next checkout opens a replacement. An idle connection the server has closed (a restart,
// pg_terminate_backend) is noticed at checkout without a round trip and replaced.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "pg_connection.hpp"

namespace idem::detail::pg {

// One pooled connection and what idem prepared on it.
struct pooled_connection {
  connection_ptr conn;
  std::uint32_t prepared = 0;  // bit i: statement i is prepared on this connection
};

class connection_pool {
 public:
  // `size` >= 1. `opened` (may be null) counts connections opened, for statistics.
  connection_pool(connect_params params, std::size_t size, std::atomic<std::uint64_t>* opened);
  ~connection_pool();
  connection_pool(const connection_pool&) = delete;
  connection_pool& operator=(const connection_pool&) = delete;

  // checkout
  //
  // RAII: the connection returns to the pool when the checkout is destroyed, unless it was marked
  // broken (or looks broken), in which case it is closed and its slot freed. Movable.
  class checkout {
   public:
    checkout(checkout&& other) noexcept;
    checkout& operator=(checkout&&) = delete;
    checkout(const checkout&) = delete;
    checkout& operator=(const checkout&) = delete;
    ~checkout();

    PGconn* get() const noexcept { return connection_->conn.get(); }
    pooled_connection& connection() const noexcept { return *connection_; }
    // The connection's state is unknown (a timeout, a lost connection): close it on return.
    void mark_broken() noexcept { broken_ = true; }

   private:
    friend class connection_pool;
    checkout(connection_pool& pool, std::unique_ptr<pooled_connection> connection) noexcept;

    connection_pool* pool_;
    std::unique_ptr<pooled_connection> connection_;
    bool broken_ = false;
  };

  // A connection for the calling thread: an idle one, a new one while fewer than `size` are
  // open, or the first one returned before `deadline`. Throws pg_error{timeout} when all are busy
  // until the deadline, and pg_error{connect_failed|timeout} when a new one cannot be opened.
  checkout acquire(steady::time_point deadline);

  std::size_t size() const noexcept { return size_; }

 private:
  void give_back(std::unique_ptr<pooled_connection> connection, bool broken) noexcept;

  const connect_params params_;
  const std::size_t size_;
  std::atomic<std::uint64_t>* opened_;

  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<pooled_connection>> idle_;  // most recently returned last
  std::size_t open_ = 0;                                  // idle + checked out + being opened
};

}  // namespace idem::detail::pg
