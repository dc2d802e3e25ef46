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
#include <deque>
#include <exception>
#include <functional>
#include <idem/event_loop.hpp>
#include <memory>
#include <mutex>
#include <vector>

#include "pg_connection.hpp"

namespace idem::detail::pg {

// One pooled connection and what idem prepared on it.
struct pooled_connection {
  pooled_connection() = default;
  pooled_connection(const pooled_connection&) = delete;
  pooled_connection& operator=(const pooled_connection&) = delete;
  // Lets the event loop that watched the socket go of it before libpq closes it.
  ~pooled_connection() {
    if (watched_by != nullptr && conn) watched_by->forget(PQsocket(conn.get()));
  }

  connection_ptr conn;
  std::uint32_t prepared = 0;  // bit i: statement i is prepared on this connection
  event_loop* watched_by = nullptr;  // the loop that watched its socket, if one did
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

  // acquire() without blocking: `done` gets the checkout, or the pg_error acquire() would throw.
  // It runs at once for an idle connection; on a thread of the shared blocking pool once a new
  // one is opened; on the thread that returns one, or on `loop` at `deadline`, for a caller that
  // queued because all were busy. `loop` must outlive the pool.
  using checkout_handler = std::function<void(std::exception_ptr, std::shared_ptr<checkout>)>;
  void async_acquire(steady::time_point deadline, event_loop& loop, checkout_handler done);

  // Answers every queued asynchronous caller with `why` and waits for the connections being
  // opened for asynchronous callers (each bounded by its deadline), whose callers are answered
  // as they end. Later async_acquire calls get `why` at once.
  void stop_async(std::exception_ptr why);

  std::size_t size() const noexcept { return size_; }

 private:
  void give_back(std::unique_ptr<pooled_connection> connection, bool broken) noexcept;
  // Opens a connection for an asynchronous caller on the shared blocking pool (open_ counts it).
  void open_for(steady::time_point deadline, checkout_handler done);
  // A queued asynchronous caller's deadline came.
  void expire(std::uint64_t name);
  pg_error busy_error() const;
  // An idle connection that is still alive, or null (the dead ones closed).
  std::unique_ptr<pooled_connection> take_idle(std::unique_lock<std::mutex>& lock);

  struct queued {
    std::uint64_t name;
    checkout_handler done;
    steady::time_point deadline;
    event_loop* loop;
    event_loop::id timer = 0;
  };

  const connect_params params_;
  const std::size_t size_;
  std::atomic<std::uint64_t>* opened_;

  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<pooled_connection>> idle_;  // most recently returned last
  std::size_t open_ = 0;                                  // idle + checked out + being opened
  std::deque<queued> queue_;                              // asynchronous callers waiting, oldest first
  std::uint64_t next_queued_ = 1;
  std::size_t opening_async_ = 0;                         // connections being opened for them
  std::condition_variable opened_async_;                  // opening_async_ fell
  std::exception_ptr stopped_;                            // stop_async() was called with it
};

}  // namespace idem::detail::pg
