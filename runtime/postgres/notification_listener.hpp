// runtime/postgres/notification_listener.hpp — one LISTEN connection per store that wakes exactly
// the waiters of the record a notification names.
//
// A waiter subscribes to its record *before* it looks at the record once more, then waits on its
// subscription: a notification that arrives between the look and the wait is not lost, because
// the subscription remembers how many notifications its record had when it was made.
//
// The listener runs on its own thread. When its connection drops it reconnects with a backoff;
// while it is down healthy() is false and waiters fall back to bounded re-checks. Every change of
// state (connected, disconnected) wakes every waiter, so that each looks at its record again: a
// notification sent while the listener was down is never waited for.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <idem/log.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "pg_connection.hpp"

namespace idem::detail::pg {

class notification_listener {
 public:
  // Starts the listener thread, which connects with `params` (each attempt bounded by
  // `connect_timeout`) and runs LISTEN `channel`. Never throws for an unreachable server: the
  // thread keeps trying. `connects` (may be null) counts successful LISTENs.
  notification_listener(connect_params params, std::string channel, std::chrono::milliseconds connect_timeout,
                        log_sink log, std::atomic<std::uint64_t>* connects);
  // Stops and joins the thread. Every subscription must be gone by then.
  ~notification_listener();
  notification_listener(const notification_listener&) = delete;
  notification_listener& operator=(const notification_listener&) = delete;

  // subscription
  //
  // A waiter's registration for one record. Not copyable; destroyed on the thread that waits.
  class subscription {
   public:
    ~subscription();
    subscription(const subscription&) = delete;
    subscription& operator=(const subscription&) = delete;

    // Blocks until the record is notified, the listener connects or disconnects, or `until`
    // passes — whichever comes first. Returns true if woken by an event, false on the timeout.
    // Events that happened since the subscription was made (or since the last wait) return
    // at once.
    bool wait_until(steady::time_point until);
    // wait_until() without blocking: `on_change` runs once, on the listener's thread (or the one
    // destroying the listener), at the first such event, unless cancel_notify() comes first.
    // Returns false, registering nothing, when one happened already (then, as after a wait, the
    // events so far count as seen). At most one registration at a time.
    [[nodiscard]] bool notify_on_change(std::function<void()> on_change);
    // After it returns the registration will not run (it may be running on the listener's thread).
    void cancel_notify();

   private:
    friend class notification_listener;
    struct slot;
    subscription(notification_listener& owner, std::string key, slot& s, std::uint64_t generation,
                 std::uint64_t epoch) noexcept;

    notification_listener& owner_;
    std::string key_;
    slot& slot_;
    std::uint64_t seen_generation_;
    std::uint64_t seen_epoch_;
    std::function<void()> on_change_;  // registered by notify_on_change()
  };

  // Registers interest in notifications whose payload is `key`.
  std::unique_ptr<subscription> subscribe(const std::string& key);

  // True while the LISTEN connection is up: a notification will reach its waiters.
  bool healthy() const noexcept { return healthy_.load(std::memory_order_acquire); }

  // The server process id of the LISTEN connection, or 0 while it is down (for tests).
  int backend_pid() const noexcept { return backend_pid_.load(std::memory_order_acquire); }

 private:
  void run();
  void serve(PGconn* conn);
  void dispatch(const std::string& key);
  void set_state(bool healthy, int pid);
  // The registrations (notify_on_change) of `s`, or of every slot when null, taken out to be run
  // without the lock; each subscription's events count as seen.
  std::vector<std::function<void()>> take_registrations_locked(subscription::slot* s);
  bool sleep_unless_stopped(std::chrono::milliseconds delay);

  const connect_params params_;
  const std::string channel_;
  const std::chrono::milliseconds connect_timeout_;
  const log_sink log_;
  std::atomic<std::uint64_t>* connects_;

  std::mutex mutex_;
  std::condition_variable stop_requested_;
  std::unordered_map<std::string, std::unique_ptr<subscription::slot>> slots_;
  std::uint64_t epoch_ = 0;  // bumped on every connect and disconnect
  bool stopping_ = false;

  std::atomic<bool> healthy_{false};
  std::atomic<int> backend_pid_{0};
  int wake_pipe_[2] = {-1, -1};  // written on shutdown to interrupt poll(2)
  std::thread thread_;
};

}  // namespace idem::detail::pg
