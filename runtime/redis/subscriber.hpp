// runtime/redis/subscriber.hpp — one pub/sub connection per store, shared by all its waiters.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <functional>
#include <utility>
#include <vector>

#include "connection.hpp"

namespace idem::detail::redis {

// idem::detail::redis::subscriber
//
// A thread that owns one Redis connection in subscribe mode. Waiters register a watch on a record's
// channel; the first watch of a channel makes the thread SUBSCRIBE, the last one leaving makes it
// UNSUBSCRIBE (SSUBSCRIBE and SUNSUBSCRIBE, sharded pub/sub, for a node of a Redis Cluster: one
// command per channel, since the channels of one command must share a slot). The thread counts the
// messages of each channel and wakes the channel's waiters. When the connection drops, every
// subscription is unconfirmed (waiters fall back to periodic re-checks) and the thread reconnects
// with a backoff of up to one second and subscribes again. A sharded subscription the node refuses
// (MOVED: the slot is served elsewhere) or drops (an unsolicited `sunsubscribe`: the slot left the
// node) is *lost*: it is not renewed here, and its waiters must watch the slot's new owner. The
// thread starts with the first watch and connects only while some channel has waiters. Thread-safe.
class subscriber {
 private:
  struct channel_state {
    std::condition_variable changed;
    std::size_t waiters = 0;
    bool sent = false;        // the last command sent for it was SUBSCRIBE
    int unanswered = 0;       // commands sent whose reply was not read yet
    bool confirmed = false;   // subscribed and every command answered
    bool lost = false;        // the node refused or dropped the (sharded) subscription
    std::uint64_t confirmations = 0;  // times `confirmed` became true
    std::uint64_t events = 0;         // messages received
    std::string last_message;         // the latest message's text
    // Asynchronous waiters to call on the next change, by watch.
    std::vector<std::pair<const void*, std::function<void()>>> listeners;
  };

 public:
  // `sharded`: SSUBSCRIBE (a node of a Redis Cluster) instead of SUBSCRIBE.
  subscriber(endpoint where, bool sharded);
  ~subscriber();
  subscriber(const subscriber&) = delete;
  subscriber& operator=(const subscriber&) = delete;

  // What a waiter saw of its channel. A waiter that saw `confirmed` and then re-checked the record
  // learns of every later completion or release through `events`; a change of `confirmations`
  // means messages may have been lost in between, so it must re-check.
  struct snapshot {
    bool confirmed = false;
    bool lost = false;  // the node will not deliver this channel's messages: watch elsewhere
    std::uint64_t confirmations = 0;
    std::uint64_t events = 0;
  };

  // idem::detail::redis::subscriber::watch
  //
  // One waiter's interest in one channel, for as long as the object lives.
  class watch {
   public:
    watch(subscriber& hub, std::string channel);
    ~watch();
    watch(const watch&) = delete;
    watch& operator=(const watch&) = delete;

    snapshot state() const;
    // The text of the latest message on the channel ("" before the first).
    std::string last_message() const;
    // Blocks until the channel's state differs from `seen` or `until` passes.
    void wait(const snapshot& seen, std::chrono::steady_clock::time_point until) const;
    // The same without blocking: registers `on_change`, called once from the subscriber's thread
    // (without its lock) when the channel's state changes. Returns false, registering nothing,
    // when the state differs from `seen` already. One registration per watch at a time.
    [[nodiscard]] bool notify_on_change(const snapshot& seen, std::function<void()> on_change);
    // Drops the registration if it was not called yet (it may be running now: callers guard).
    void cancel_notify();

   private:
    subscriber& hub_;
    std::string channel_;
    std::shared_ptr<channel_state> state_;
  };

  std::uint64_t messages() const noexcept { return messages_.load(std::memory_order_relaxed); }
  // Connections opened (the first, and one after each drop).
  std::uint64_t connects() const noexcept { return connects_.load(std::memory_order_relaxed); }

 private:
  void run() noexcept;
  // A (un)subscribe command sent and not answered yet, in the order sent.
  struct pending {
    std::string channel;
    bool subscribe = false;
  };
  void serve(connection& conn);
  void handle(const redisReply& reply, std::deque<pending>& sent);
  // The channel's state changed: wakes its blocked waiters and queues its listeners for run_due.
  void changed_locked(channel_state& ch);
  // Calls the listeners changed_locked queued, without the lock (on the subscriber's thread).
  void run_due();
  void answered_locked(const std::string& channel, bool subscribe);
  void lose_locked(const std::string& channel);
  void disconnected();
  void wake() noexcept;
  // Sleeps until woken or `pause` passes (negative: until woken).
  void sleep_for(std::chrono::milliseconds pause) noexcept;

  endpoint where_;
  bool sharded_;
  int wake_fd_ = -1;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<channel_state>> channels_;
  std::vector<std::function<void()>> due_;  // listeners to call, see changed_locked
  bool dirty_ = false;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<std::uint64_t> messages_{0};
  std::atomic<std::uint64_t> connects_{0};
};

}  // namespace idem::detail::redis
