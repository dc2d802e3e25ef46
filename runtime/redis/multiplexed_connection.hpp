// runtime/redis/multiplexed_connection.hpp — one command connection that many threads pipeline on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "connection.hpp"

namespace idem::detail::redis {

// idem::detail::redis::multiplexed_connection
//
// A connected, authenticated Redis connection shared by every thread that calls exchange(). Each
// caller writes its commands at once (under a mutex, so the order of writes is the order of
// replies) and waits for its replies; one waiting caller at a time is the reader: it reads what
// has arrived and hands every complete reply to its caller, in order, then passes the reader role
// on to the oldest caller still waiting. There is no I/O thread: a caller alone on the connection
// writes, reads its own reply and returns, exactly like a blocking client; concurrent callers
// share reads and writes, so Redis serves several requests per system call.
//
// Once a read or write failed (timeout, reset, protocol error) the connection is broken: every
// call pipelined on it throws io_failure, and so does every later call. Thread-safe.
class multiplexed_connection {
 public:
  // Connects within connect_timeout, then AUTH and SELECT as configured. Throws io_failure.
  explicit multiplexed_connection(const endpoint& where);
  ~multiplexed_connection();
  multiplexed_connection(const multiplexed_connection&) = delete;
  multiplexed_connection& operator=(const multiplexed_connection&) = delete;

  // Writes `commands` together and waits for one reply each into `replies` (same size). A reply of
  // type error is returned, not thrown. `blocking` marks a command that holds the connection on
  // the server side (WAIT), so that the pool keeps other callers off it. Throws io_failure.
  void exchange(std::span<command> commands, std::span<reply_ptr> replies, bool blocking = false);
  // One command, one reply.
  reply_ptr run(command& cmd, bool blocking = false) {
    reply_ptr reply;
    exchange(std::span<command>(&cmd, 1), std::span<reply_ptr>(&reply, 1), blocking);
    return reply;
  }

  // False when the peer closed the connection or it broke. When nothing is in flight and the
  // connection has been idle for at least `idle_for`, checks the socket first with a non-blocking
  // peek (a Redis that restarted meanwhile closed it): no round trip, and no system call on a
  // connection in steady use.
  bool usable(std::chrono::steady_clock::duration idle_for);

  bool broken() const noexcept { return broken_.load(std::memory_order_acquire); }
  // Calls written and not yet answered; calls among them marked blocking.
  std::size_t in_flight() const noexcept { return in_flight_.load(std::memory_order_relaxed); }
  std::size_t blocking_in_flight() const noexcept { return blocking_in_flight_.load(std::memory_order_relaxed); }

 private:
  struct call;
  void send_locked(const std::string& wire);
  // One read; every complete reply it finished is appended to `replies`. Throws io_failure.
  void read_some(std::deque<reply_ptr>& replies);
  void deliver_locked(std::deque<reply_ptr>& replies);
  void break_locked(std::string reason);

  connection conn_;  // setup (AUTH, SELECT) and the socket; reads and writes go around its buffers
  std::chrono::milliseconds command_timeout_;
  struct reader_deleter {
    void operator()(redisReader* r) const noexcept;
  };
  std::unique_ptr<redisReader, reader_deleter> parser_;  // used by the current reader only

  std::mutex mutex_;
  std::deque<call*> waiting_;  // written, not yet answered, in write order
  bool reading_ = false;       // a caller holds the reader role
  std::string failure_;        // why the connection broke
  std::chrono::steady_clock::time_point last_reply_;
  std::atomic<bool> broken_{false};
  std::atomic<std::size_t> in_flight_{0};
  std::atomic<std::size_t> blocking_in_flight_{0};
};

}  // namespace idem::detail::redis
