// runtime/core/heartbeat_scheduler.hpp — one thread per engine that keeps held leases alive.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <idem/identity.hpp>
#include <idem/lease_token.hpp>
#include <idem/store.hpp>

namespace idem::detail {

// Extends every registered lease by its full length every lease/2, on one thread.
//
// Registration costs no allocation once warmed up: entries live in a slot pool, and the entries
// of one lease length sit in a FIFO list ordered by due time (same period, so appending keeps the
// order). The thread looks only at the heads of those lists. A registration wakes the thread only
// when its entry is due before the thread's next wake-up, which on a busy engine is rare.
class heartbeat_scheduler {
 public:
  explicit heartbeat_scheduler(store& backing_store);
  ~heartbeat_scheduler();
  heartbeat_scheduler(const heartbeat_scheduler&) = delete;
  heartbeat_scheduler& operator=(const heartbeat_scheduler&) = delete;

  // Cancels its registration when destroyed or cancelled. Movable.
  class handle {
   public:
    handle() = default;
    handle(handle&& other) noexcept : owner_(other.owner_), slot_(other.slot_) { other.owner_ = nullptr; }
    handle& operator=(handle&& other) noexcept;
    ~handle() { cancel(); }
    // After cancel() returns the scheduler no longer touches the identity. Idempotent.
    void cancel() noexcept;

   private:
    friend class heartbeat_scheduler;
    handle(heartbeat_scheduler* owner, std::uint32_t slot) : owner_(owner), slot_(slot) {}
    heartbeat_scheduler* owner_ = nullptr;
    std::uint32_t slot_ = 0;
  };

  // Extends (`id`, `token`) by `lease` every lease/2 until the handle is cancelled. `id` must
  // outlive the handle.
  handle start(const identity& id, const lease_token& token, std::chrono::milliseconds lease);

 private:
  using clock = std::chrono::steady_clock;
  static constexpr std::uint32_t none = UINT32_MAX;

  struct slot {
    const identity* id = nullptr;
    lease_token token;
    std::chrono::milliseconds lease{0};
    clock::time_point due;
    std::uint32_t prev = none, next = none;
    std::uint32_t queue = none;  // index into queues_, none while not linked
    bool ticking = false;        // the thread is extending it right now, outside the lock
    bool cancelled = false;
  };
  struct fifo {
    std::chrono::milliseconds period{0};
    std::uint32_t head = none, tail = none;
  };

  void run();
  void link(std::uint32_t index, std::uint32_t queue);
  void unlink(std::uint32_t index);
  void cancel(std::uint32_t index) noexcept;

  store& store_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable tick_done_;
  std::deque<slot> slots_;
  std::vector<std::uint32_t> free_;
  std::vector<fifo> queues_;
  clock::time_point sleeping_until_ = clock::time_point::max();
  std::chrono::milliseconds min_period_ = std::chrono::milliseconds::max();  // shortest period registered
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace idem::detail
