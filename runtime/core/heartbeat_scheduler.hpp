// runtime/core/heartbeat_scheduler.hpp — the threads of one engine that keep held leases alive.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <idem/identity.hpp>
#include <idem/lease_token.hpp>
#include <idem/log.hpp>
#include <idem/store.hpp>

namespace idem::detail {

struct young_entry;  // a registration on its thread's own list (start_here), see heartbeat_scheduler.cpp

// Extends every registered lease by its full length every lease/2; an extend that fails (throws)
// is tried again after lease/8, so one failed attempt does not cost the lease.
//
// Extends run in parallel: a store call that is slow for one record (a lock wait, a pool slot, a
// stalled connection) never holds up another record's extend. The threads form a leader/followers
// pool: one thread (the leader) sleeps until the next entry is due, takes it, hands leadership to
// an idle follower — or starts a new thread if none is idle — and extends outside the lock. So the
// pool grows to the number of extends that are slow at the same time, plus one, and never past
// max_threads; on a healthy store it stays at one or two threads.
//
// Registration costs no allocation once warmed up: entries live in a slot pool, and the entries of
// one lease length sit in a FIFO list ordered by due time (same period, so appending keeps the
// order). The leader looks only at the heads of those lists. A registration wakes the leader only
// when its entry is due before the leader's next wake-up, which on a busy engine is rare. It does
// not copy the identity either: most calls end before their first heartbeat is due, so an entry
// refers to its registrant's identity and copies it (into storage that keeps its capacity) only
// when its first extend is taken.
//
// A synchronous call registers without any lock (start_here): on a list of its own thread, which
// the leader looks through every `young_scan`, moving the registrations it finds there (calls that
// have run since its previous look) onto its own lists, due one period after that previous look.
// The calls that end sooner, almost all of them, never touch the scheduler's lock. The leader looks
// only while such registrations are being made, and only leases of at least 8 scans take that way.
class heartbeat_scheduler {
 public:
  static constexpr std::size_t max_threads = 64;

  // `log` must not throw (the engine passes its guarded sink). A lease length unused for
  // `forget_after` (and at least ten of its periods) stops counting for the idle wake-up
  // interval, so that one short-lease call does not keep an idle engine waking up often forever.
  // start_here() registrations are looked for every `young_scan` while they are being made.
  heartbeat_scheduler(store& backing_store, log_sink log,
                      std::chrono::milliseconds forget_after = std::chrono::minutes(1),
                      std::chrono::milliseconds young_scan = std::chrono::milliseconds(250));
  ~heartbeat_scheduler();
  heartbeat_scheduler(const heartbeat_scheduler&) = delete;
  heartbeat_scheduler& operator=(const heartbeat_scheduler&) = delete;

  // Cancels its registration when destroyed or cancelled. Movable.
  class handle {
   public:
    handle() = default;
    handle(handle&& other) noexcept : owner_(other.owner_), slot_(other.slot_), young_(other.young_) {
      other.owner_ = nullptr;
    }
    handle& operator=(handle&& other) noexcept;
    ~handle() { cancel(); }
    // No extend starts after cancel() returns. Never waits for one already running: an extend
    // that lands after the record was completed or released changes nothing (it is fenced by
    // the token). Idempotent.
    void cancel() noexcept;

   private:
    friend class heartbeat_scheduler;
    handle(heartbeat_scheduler* owner, std::uint32_t slot) : owner_(owner), slot_(slot) {}
    handle(heartbeat_scheduler* owner, young_entry* young) : owner_(owner), young_(young) {}
    heartbeat_scheduler* owner_ = nullptr;
    std::uint32_t slot_ = 0;
    young_entry* young_ = nullptr;  // set: registered by start_here, cancelled on the same thread
  };

  // Extends (`id`, `token`) by `lease` every lease/2 (at least every millisecond), and lease/8
  // after an extend that threw, until the handle is cancelled. `id` is referred to, not copied, until
  // the first extend: it must outlive the handle's registration (cancel it or destroy it first).
  [[nodiscard]] handle start(const identity& id, const lease_token& token, std::chrono::milliseconds lease);

  // As start(), for a caller that cancels (or destroys) the handle on this same thread, nested
  // registrations ending in reverse order, as a synchronous call does. Takes no lock for a lease
  // of at least 8 `young_scan`s once such registrations are in use.
  [[nodiscard]] handle start_here(const identity& id, const lease_token& token, std::chrono::milliseconds lease);

  // Whether start_here() registers without a lock now. For tests.
  bool registers_young() const noexcept { return young_enabled_.load(std::memory_order_relaxed); }
  // How many start_here() registrations the leader has found still running and taken onto its
  // lists so far. For tests.
  std::size_t adopted_young() const;

  // How many threads the pool has now. For tests and statistics.
  std::size_t threads() const;
  // The leader's idle wake-up interval: the shortest period among recently used lease lengths
  // (zero when none). For tests.
  std::chrono::milliseconds idle_period() const;

 private:
  using clock = std::chrono::steady_clock;
  static constexpr std::uint32_t none = UINT32_MAX;

  // How soon an extend that threw is tried again: a quarter of its period, at least 1 ms.
  static std::chrono::milliseconds retry_delay(std::chrono::milliseconds period);

  struct slot {
    const identity* registrant = nullptr;  // the registrant's identity until the first extend copies it
    std::optional<identity> id;  // the copy: engaged once used; later uses assign into its storage
    lease_token token;
    std::chrono::milliseconds lease{0};
    std::chrono::milliseconds period{0};
    clock::time_point due;
    std::uint32_t prev = none, next = none;
    std::uint32_t queue = none;  // index into queues_, none while not linked
    bool running = false;        // a thread is extending it right now, outside the lock
    bool cancelled = false;      // freed by that thread when it is done
  };
  struct fifo {
    std::chrono::milliseconds period{0};
    std::uint32_t head = none, tail = none;
    clock::time_point last_used;
  };

  void work();
  // Under the lock: takes a free slot for (`id`, `token`, `lease`) due at `due` and links it.
  std::uint32_t register_locked(const identity& id, const lease_token& token, std::chrono::milliseconds lease,
                                clock::time_point due, clock::time_point now);
  // start() for start_here(), turning start_here's lock-free way on.
  handle start_locked(const identity& id, const lease_token& token, std::chrono::milliseconds lease,
                      bool enable_young);
  // As the leader, under the lock: moves the young registrations found onto the lists; turns the
  // lock-free way off when it went unused for forget_after_.
  void scan_young(clock::time_point now);
  void adopt_young(clock::time_point published_after, clock::time_point now);
  void cancel_young(young_entry& entry) noexcept;
  std::uint32_t take_due(std::unique_lock<std::mutex>& lock);
  void extend(std::uint32_t index, std::unique_lock<std::mutex>& lock);
  void own_identity(slot& s);
  void forget_unused_periods(clock::time_point now);
  std::uint32_t queue_for(std::chrono::milliseconds period, clock::time_point now);
  void link(std::uint32_t index, std::uint32_t queue);
  void unlink(std::uint32_t index);
  void free_slot(std::uint32_t index);
  void cancel(std::uint32_t index) noexcept;

  store& store_;
  log_sink log_;
  const std::chrono::milliseconds forget_after_;
  const std::chrono::milliseconds young_scan_;
  // Whether start_here() may register on its thread's list: set under the lock, cleared by the
  // leader, read by registrants after publishing (the leader scans once more after clearing it).
  std::atomic<bool> young_enabled_{false};
  std::atomic<std::uint64_t> scans_{0};          // the leader's looks at the young lists so far
  std::atomic<std::uint64_t> young_used_at_{0};  // scans_ at the latest start_here() that registered young
  clock::time_point last_scan_;                  // under the lock: when the leader last looked
  std::size_t adopted_young_ = 0;                // under the lock
  mutable std::mutex mutex_;
  std::condition_variable leader_wake_;  // the leader sleeps on it until the next due time
  std::condition_variable followers_;    // idle threads wait on it to become the leader
  std::deque<slot> slots_;
  std::vector<std::uint32_t> free_;
  std::vector<fifo> queues_;
  clock::time_point leader_sleeps_until_ = clock::time_point::min();  // min: no leader asleep
  std::chrono::milliseconds idle_period_{0};
  bool has_leader_ = false;
  std::size_t idle_followers_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// A few independent heartbeat_schedulers, so that first calls on different threads do not all
// take one scheduler's lock to register and cancel (measured: two threads of first calls on the
// memory store ran slower than one, the lock passed back and forth). A thread always registers
// with the same stripe, picked by its order of first use across the process; each stripe has its
// own leader thread and pool, started with the engine.
class heartbeat_stripes {
 public:
  // `count` stripes, at least 1; default_count() is the hardware's concurrency, at most 8.
  heartbeat_stripes(store& backing_store, const log_sink& log, std::size_t count = default_count());

  // As heartbeat_scheduler::start and start_here, on the calling thread's stripe.
  [[nodiscard]] heartbeat_scheduler::handle start(const identity& id, const lease_token& token,
                                                  std::chrono::milliseconds lease);
  [[nodiscard]] heartbeat_scheduler::handle start_here(const identity& id, const lease_token& token,
                                                       std::chrono::milliseconds lease);

  // How many threads the stripes have now, all together. For tests and statistics.
  std::size_t threads() const;
  std::size_t size() const noexcept { return stripes_.size(); }

  static std::size_t default_count();

 private:
  heartbeat_scheduler& this_thread_stripe();

  std::vector<std::unique_ptr<heartbeat_scheduler>> stripes_;
};

}  // namespace idem::detail
