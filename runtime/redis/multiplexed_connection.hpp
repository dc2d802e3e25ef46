// runtime/redis/multiplexed_connection.hpp — one command connection that many threads pipeline on.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "connection.hpp"
#include "../core/store_loop.hpp"

namespace idem::detail::redis {

// idem::detail::redis::multiplexed_connection
//
// A connected, authenticated Redis connection shared by every thread that calls exchange(). Each
// caller writes its commands at once (under a mutex, so the order of writes is the order of
// replies) and waits for its replies; one waiting caller at a time is the reader: it reads what
// has arrived and hands every complete reply to its caller, in order, then passes the reader role
// on to the oldest caller still waiting. A blocking caller alone on the connection writes, reads
// its own reply and returns, exactly like a blocking client; concurrent callers share reads and
// writes, so Redis serves several requests per system call. An asynchronous call (async_exchange)
// waits on no thread: when the oldest call waiting is one, the reader role goes to the store's
// event loop, which reads when the socket is readable and answers the call from its thread.
//
// Once a read or write failed (timeout, reset, protocol error) the connection is broken: every
// call pipelined on it throws io_failure, and so does every later call. Thread-safe.
class multiplexed_connection : public std::enable_shared_from_this<multiplexed_connection> {
 public:
  // Connects within connect_timeout, then AUTH and SELECT as configured. Throws io_failure.
  // `loop` reads for asynchronous calls; its backend is kept as long as the connection.
  multiplexed_connection(const endpoint& where, store_loop& loop);
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

  // What an asynchronous exchange reports: the failure (null when every reply arrived) and the
  // replies, one per command. Runs on the event loop's thread, or on the calling thread when the
  // connection was broken already or the write failed.
  using exchange_handler = std::function<void(const io_failure* failure, std::span<reply_ptr> replies)>;
  // Writes `commands` together (before it returns: they may die then) and calls `done` with their
  // replies later, without a thread waiting. `replies` (one per command) must live until `done`.
  // Never throws for the connection's sake: a failure goes to `done`.
  void async_exchange(std::span<command> commands, std::span<reply_ptr> replies, bool blocking,
                      exchange_handler done);

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
  using finished_calls = std::vector<std::unique_ptr<call>>;  // asynchronous calls to answer, in order
  static std::string& format(std::span<command> commands);
  // Writes the commands held back, then `own`. Throws io_failure (failure_ says why).
  void send_locked(const std::string& own);
  bool await_socket(short events, std::chrono::steady_clock::time_point deadline) const;
  // One blocking read, up to the command timeout; every complete reply it finished is appended to
  // `replies`. Throws io_failure.
  void read_some(std::deque<reply_ptr>& replies);
  // Feeds bytes read to the reply parser (the current reader's). Throws io_failure.
  void parse(const char* bytes, std::size_t size, std::deque<reply_ptr>& replies);
  void deliver_locked(std::deque<reply_ptr>& replies, finished_calls& finished);
  void break_locked(std::string reason, finished_calls& finished);
  // Hands the reader role to the oldest waiting call when nobody holds it: a blocking caller is
  // woken, an asynchronous one makes the event loop watch the socket.
  void pass_reader_role_locked(finished_calls& finished);
  // What the event loop read for the asynchronous calls (see event_loop::read_some).
  void on_read(event_loop::wake why, std::size_t bytes, int error);
  // Answers `finished` outside the lock, in order.
  void answer(finished_calls& finished) const;

  connection conn_;  // setup (AUTH, SELECT) and the socket; reads and writes go around its buffers
  store_loop& loop_;  // arms the asynchronous reads (only while the store lives)
  // The loop itself, which forget() must reach when the connection goes: that may be after the
  // store (the last handler it ran let the store go).
  std::shared_ptr<event_loop> backend_;
  std::chrono::milliseconds command_timeout_;
  struct reader_deleter {
    void operator()(redisReader* r) const noexcept;
  };
  std::unique_ptr<redisReader, reader_deleter> parser_;  // used by the current reader only
  std::array<char, 16 * 1024> loop_buffer_{};  // what the event loop reads into, for the reader role

  std::mutex mutex_;
  std::deque<call*> waiting_;  // written (or held back in unsent_), not yet answered, in order
  std::string unsent_;         // commands of asynchronous calls held back for one write
  bool reading_ = false;       // a caller, or the event loop, holds the reader role
  std::string failure_;        // why the connection broke
  std::chrono::steady_clock::time_point last_reply_;
  std::atomic<bool> broken_{false};
  std::atomic<std::size_t> in_flight_{0};
  std::atomic<std::size_t> blocking_in_flight_{0};
};

}  // namespace idem::detail::redis
