// runtime/redis/connection_pool.hpp — the command connections of one store.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "connection.hpp"
#include "multiplexed_connection.hpp"

#include "../core/store_loop.hpp"

namespace idem::detail::redis {

// idem::detail::redis::connection_pool
//
// Up to `capacity` multiplexed connections, opened on demand. A call takes an open connection with
// nothing in flight; when every open one is busy it opens another, up to `capacity`; beyond that it
// pipelines on the least busy (one without a blocking WAIT in flight if there is one). So up to
// `capacity` concurrent callers each have a connection (no thread waits for another's read), and a
// store with capacity 1 pipelines everything on one connection (Redis then serves many requests per
// system call: docs/stores/redis.md has the measured trade-off). A connection that broke, or that
// the server closed while it sat idle, is dropped and replaced on the next call. Thread-safe.
class connection_pool {
 public:
  // `loop` serves the connections' asynchronous calls and must outlive the pool.
  connection_pool(endpoint where, std::size_t capacity, store_loop& loop);
  ~connection_pool();
  connection_pool(const connection_pool&) = delete;
  connection_pool& operator=(const connection_pool&) = delete;

  // A connection to send on, shared with other callers. Opens one when needed. Throws io_failure.
  std::shared_ptr<multiplexed_connection> take();
  // For asynchronous calls, which pipeline rather than open more: calls `done` with the least busy
  // open connection, at once; when none is open, once one is, opened on the shared blocking pool.
  // Callers that come meanwhile queue for that connection (no thread each). On failure `done` gets
  // the io_failure and a null connection. Never throws.
  using take_handler = std::function<void(std::shared_ptr<multiplexed_connection>, const io_failure*)>;
  void async_take(take_handler done);
  // async_take's common case without a handler: the least busy open connection (usable), or null
  // when none is open. Never opens one, never blocks on the network. Never throws.
  std::shared_ptr<multiplexed_connection> take_open();

  const endpoint& where() const noexcept { return where_; }
  std::uint64_t opened() const noexcept { return opened_.load(std::memory_order_relaxed); }

 private:
  // An open connection to share: one with nothing in flight, else (when every one there may be is
  // open or being opened) the least busy; null when one should be opened first.
  std::shared_ptr<multiplexed_connection> pick_locked();
  // The open connection with the fewest calls in flight (broken ones dropped), or null.
  std::shared_ptr<multiplexed_connection> least_busy_locked();
  // Opens a connection for the asynchronous callers in awaiting_open_ (a task on the blocking pool).
  void open_for_awaiting();

  endpoint where_;
  std::size_t capacity_;
  store_loop& loop_;
  std::mutex mutex_;
  std::condition_variable opened_or_failed_;  // a connection being opened is done, either way
  std::vector<std::shared_ptr<multiplexed_connection>> open_;
  std::size_t opening_ = 0;  // being opened, outside the lock
  std::vector<take_handler> awaiting_open_;  // asynchronous callers waiting for the one being opened
  std::atomic<std::uint64_t> opened_{0};
};

}  // namespace idem::detail::redis
