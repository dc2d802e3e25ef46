// runtime/postgres/cancel_worker.hpp — asks the server to cancel statements the store stopped
// waiting for, without making any caller wait for the answer.
//
// PQcancel opens a connection to the postmaster, sends the cancel request and blocks until the
// postmaster closes that connection: while the server is frozen (SIGSTOP, a stalled host) that is
// forever, and libpq 15 has no bounded or non-blocking form of it. So a timed-out statement's
// cancel handle (PQgetCancel: a copy of the address, backend pid and secret key, no I/O) is queued
// here and sent by one thread of the worker's own. The queue is bounded; what does not fit is
// dropped (while one cancel is stuck, the server is not answering any of them either).
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <thread>

namespace idem::detail::pg {

class cancel_worker {
 public:
  // `join_bound`: how long the destructor waits for a cancel in progress to end.
  explicit cancel_worker(std::chrono::milliseconds join_bound);
  // Drops what is queued and stops the thread: joins it if the cancel in progress (if any) ends
  // within `join_bound`, otherwise detaches it. A detached thread touches only state of its own
  // (shared with this object) and ends when the postmaster answers or the process exits.
  ~cancel_worker();
  cancel_worker(const cancel_worker&) = delete;
  cancel_worker& operator=(const cancel_worker&) = delete;

  // Queues a cancel of the statement running on `conn` (which the caller may close at once).
  // Never blocks on the network; starts the thread on first use. The future becomes true when
  // the postmaster has taken the request (it has then signalled the backend), false if the
  // request could not be sent or was dropped.
  std::future<bool> request(PGconn* conn);

  // Cancels queued (requested and taken into the queue) and delivered (the postmaster took the
  // request: PQcancel succeeded; whether the statement was still running is not known).
  std::uint64_t requested() const noexcept;
  std::uint64_t delivered() const noexcept;

 private:
  struct state;
  static void run(const std::shared_ptr<state>& s);

  std::chrono::milliseconds join_bound_;
  std::shared_ptr<state> state_;
  std::thread thread_;
};

}  // namespace idem::detail::pg
