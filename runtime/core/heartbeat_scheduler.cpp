// runtime/core/heartbeat_scheduler.cpp — the lease-extending thread pool of one engine.
#include "heartbeat_scheduler.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>

#include <fmt/format.h>

namespace idem::detail {

// One registration on its thread's list. The registering thread fills it while it is free and
// publishes it (held); a leader that finds it held and its own pins it (adopting), links a slot for
// it and hands it back (adopted, `slot` set). The thread frees it: at once while it is held, after
// cancelling the slot once it is adopted.
struct young_entry {
  enum state_value : std::uint8_t { free, held, adopting, adopted };
  std::atomic<std::uint8_t> state{free};
  std::atomic<heartbeat_scheduler*> owner{nullptr};
  const identity* id = nullptr;
  lease_token token;
  std::chrono::milliseconds lease{0};
  std::uint32_t slot = 0;
  std::uint8_t index = 0;  // in its list
};

namespace {

// Each thread's young registrations, visible to every leader through the registry.
struct young_list;
struct young_registry {
  std::mutex mutex;
  std::vector<young_list*> lists;
};
// Never destroyed: threads may end after static destruction.
young_registry& registry() {
  static young_registry* const instance = new young_registry;
  return *instance;
}

struct young_list {
  std::array<young_entry, 8> entries;  // deeper nesting registers under the lock
  std::uint8_t used = 0;               // bit i: entries[i] is registered; this thread only

  young_list() {
    for (std::uint8_t i = 0; i < entries.size(); ++i) entries[i].index = i;
    std::lock_guard lock(registry().mutex);
    registry().lists.push_back(this);
  }
  ~young_list() {
    std::lock_guard lock(registry().mutex);
    std::erase(registry().lists, this);
  }
  young_list(const young_list&) = delete;
  young_list& operator=(const young_list&) = delete;

  static young_list& of_this_thread() {
    thread_local young_list list;
    return list;
  }
  // A free entry of this thread, or null when all are registered.
  young_entry* take() noexcept {
    for (std::uint8_t i = 0; i < entries.size(); ++i)
      if ((used & (1u << i)) == 0) {
        used = static_cast<std::uint8_t>(used | (1u << i));
        return &entries[i];
      }
    return nullptr;
  }
  void give_back(const young_entry& entry) noexcept { used = static_cast<std::uint8_t>(used & ~(1u << entry.index)); }
};

std::string describe_current() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

}  // namespace

std::chrono::milliseconds heartbeat_scheduler::retry_delay(std::chrono::milliseconds period) {
  return std::max(period / 4, std::chrono::milliseconds(1));
}

heartbeat_scheduler::heartbeat_scheduler(store& backing_store, log_sink log, std::chrono::milliseconds forget_after,
                                         std::chrono::milliseconds young_scan)
    : store_(backing_store),
      log_(std::move(log)),
      forget_after_(forget_after),
      young_scan_(std::max(young_scan, std::chrono::milliseconds(1))) {
  std::lock_guard lock(mutex_);
  threads_.emplace_back([this] { work(); });
}

heartbeat_scheduler::~heartbeat_scheduler() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  leader_wake_.notify_all();
  followers_.notify_all();
  // No thread starts another once stopping_ is set, so the list is final here.
  {
    std::lock_guard lock(mutex_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

heartbeat_scheduler::handle& heartbeat_scheduler::handle::operator=(handle&& other) noexcept {
  if (this != &other) {
    cancel();
    owner_ = other.owner_;
    slot_ = other.slot_;
    young_ = other.young_;
    other.owner_ = nullptr;
  }
  return *this;
}

void heartbeat_scheduler::handle::cancel() noexcept {
  if (owner_ == nullptr) return;
  if (young_ != nullptr)
    owner_->cancel_young(*young_);
  else
    owner_->cancel(slot_);
  owner_ = nullptr;
  young_ = nullptr;
}

namespace {
std::chrono::milliseconds period_of(std::chrono::milliseconds lease) {
  return std::max(lease / 2, std::chrono::milliseconds(1));
}
}  // namespace

std::uint32_t heartbeat_scheduler::register_locked(const identity& id, const lease_token& token,
                                                   std::chrono::milliseconds lease, clock::time_point due,
                                                   clock::time_point now) {
  std::uint32_t index;
  if (free_.empty()) {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    index = free_.back();
    free_.pop_back();
  }
  try {
    slot& s = slots_[index];
    s.registrant = &id;
    s.token = token;
    s.lease = lease;
    s.period = period_of(lease);
    s.due = due;
    s.running = false;
    s.cancelled = false;
    link(index, queue_for(s.period, now));
  } catch (...) {
    free_slot(index);
    throw;
  }
  return index;
}

heartbeat_scheduler::handle heartbeat_scheduler::start(const identity& id, const lease_token& token,
                                                       std::chrono::milliseconds lease) {
  return start_locked(id, token, lease, false);
}

heartbeat_scheduler::handle heartbeat_scheduler::start_locked(const identity& id, const lease_token& token,
                                                              std::chrono::milliseconds lease, bool enable_young) {
  const auto now = clock::now();
  const auto due = now + period_of(lease);
  bool wake_leader = false;
  std::uint32_t index;
  {
    std::lock_guard lock(mutex_);
    index = register_locked(id, token, lease, due, now);
    auto wake_by = due;
    if (enable_young && !young_enabled_.load(std::memory_order_relaxed)) {
      young_used_at_.store(scans_.load(std::memory_order_relaxed), std::memory_order_relaxed);
      last_scan_ = now;
      young_enabled_.store(true, std::memory_order_seq_cst);
      wake_by = std::min(wake_by, now + young_scan_);  // the leader's first look
    }
    // Wake the leader only if it sleeps past this entry's due time; usually it does not.
    if (wake_by < leader_sleeps_until_) {
      leader_sleeps_until_ = wake_by;
      wake_leader = true;
    }
  }
  if (wake_leader) leader_wake_.notify_one();
  return handle(this, index);
}

heartbeat_scheduler::handle heartbeat_scheduler::start_here(const identity& id, const lease_token& token,
                                                            std::chrono::milliseconds lease) {
  // A lease this short would be due before the leader's next look could be relied upon.
  if (period_of(lease) < 4 * young_scan_) return start_locked(id, token, lease, false);
  if (!young_enabled_.load(std::memory_order_acquire)) return start_locked(id, token, lease, true);
  young_list& list = young_list::of_this_thread();
  young_entry* entry = list.take();
  if (entry == nullptr) return start_locked(id, token, lease, false);
  entry->owner.store(this, std::memory_order_relaxed);
  entry->id = &id;
  entry->token = token;
  entry->lease = lease;
  entry->state.store(young_entry::held, std::memory_order_seq_cst);
  // Written only when the leader has looked since: the line it shares stays clean between looks.
  if (const std::uint64_t scan = scans_.load(std::memory_order_relaxed);
      young_used_at_.load(std::memory_order_relaxed) != scan)
    young_used_at_.store(scan, std::memory_order_relaxed);
  // The leader may have turned this way off meanwhile: its last look either found the entry, or
  // this load sees the switch (both sides are sequentially consistent) and the entry is withdrawn.
  if (!young_enabled_.load(std::memory_order_seq_cst)) {
    cancel_young(*entry);
    return start_locked(id, token, lease, true);
  }
  return handle(this, entry);
}

void heartbeat_scheduler::cancel_young(young_entry& entry) noexcept {
  while (true) {
    std::uint8_t state = young_entry::held;
    if (entry.state.compare_exchange_weak(state, young_entry::free, std::memory_order_acq_rel,
                                          std::memory_order_acquire))
      break;
    if (state == young_entry::adopted) {
      cancel(entry.slot);
      entry.state.store(young_entry::free, std::memory_order_release);
      break;
    }
    // A leader is linking it (a few instructions under its lock), or the exchange failed spuriously.
    std::this_thread::yield();
  }
  young_list::of_this_thread().give_back(entry);
}

void heartbeat_scheduler::scan_young(clock::time_point now) {
  const auto published_after = last_scan_;
  last_scan_ = now;
  const std::uint64_t scan = scans_.load(std::memory_order_relaxed) + 1;
  scans_.store(scan, std::memory_order_relaxed);
  adopt_young(published_after, now);
  const auto unused_scans = static_cast<std::uint64_t>(std::max<std::int64_t>(forget_after_ / young_scan_, 4));
  if (scan - young_used_at_.load(std::memory_order_relaxed) > unused_scans) {
    young_enabled_.store(false, std::memory_order_seq_cst);
    adopt_young(published_after, now);  // what was published before its registrant could see the switch
  }
}

void heartbeat_scheduler::adopt_young(clock::time_point published_after, clock::time_point now) {
  std::lock_guard lock(registry().mutex);
  for (young_list* list : registry().lists)
    for (young_entry& entry : list->entries) {
      if (entry.state.load(std::memory_order_seq_cst) != young_entry::held ||
          entry.owner.load(std::memory_order_relaxed) != this)
        continue;
      std::uint8_t state = young_entry::held;
      if (!entry.state.compare_exchange_strong(state, young_entry::adopting, std::memory_order_acq_rel)) continue;
      if (entry.owner.load(std::memory_order_relaxed) != this) {  // registered again, by another engine
        entry.state.store(young_entry::held, std::memory_order_release);
        continue;
      }
      try {
        // Published after the previous look began (else that look found it): due one period
        // after that look at the latest, which is early, never late.
        entry.slot = register_locked(*entry.id, entry.token, entry.lease, published_after + period_of(entry.lease), now);
        entry.state.store(young_entry::adopted, std::memory_order_release);
        ++adopted_young_;
      } catch (...) {
        entry.state.store(young_entry::held, std::memory_order_release);  // looked for again next time
        log_({log_level::warning, fmt::format("could not prepare a heartbeat: {}", describe_current())});
      }
    }
}

std::size_t heartbeat_scheduler::threads() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
}

std::size_t heartbeat_scheduler::adopted_young() const {
  std::lock_guard lock(mutex_);
  return adopted_young_;
}

std::chrono::milliseconds heartbeat_scheduler::idle_period() const {
  std::lock_guard lock(mutex_);
  return idle_period_;
}

std::uint32_t heartbeat_scheduler::queue_for(std::chrono::milliseconds period, clock::time_point now) {
  for (std::uint32_t q = 0; q < queues_.size(); ++q) {
    if (queues_[q].period == period) {
      queues_[q].last_used = now;
      return q;
    }
  }
  queues_.push_back(fifo{period, none, none, now});
  if (idle_period_ == std::chrono::milliseconds::zero() || period < idle_period_) idle_period_ = period;
  return static_cast<std::uint32_t>(queues_.size() - 1);
}

void heartbeat_scheduler::forget_unused_periods(clock::time_point now) {
  // Only empty lists go: a slot that is running (unlinked) finds its list again by period.
  std::erase_if(queues_, [&](const fifo& q) {
    return q.head == none && now - q.last_used > std::max<clock::duration>(forget_after_, 10 * q.period);
  });
  for (std::uint32_t q = 0; q < queues_.size(); ++q)
    for (std::uint32_t i = queues_[q].head; i != none; i = slots_[i].next) slots_[i].queue = q;
  idle_period_ = std::chrono::milliseconds::zero();
  for (const fifo& q : queues_)
    if (idle_period_ == std::chrono::milliseconds::zero() || q.period < idle_period_) idle_period_ = q.period;
}

void heartbeat_scheduler::link(std::uint32_t index, std::uint32_t queue) {
  slot& s = slots_[index];
  fifo& q = queues_[queue];
  s.queue = queue;
  s.next = none;
  s.prev = q.tail;
  if (q.tail != none)
    slots_[q.tail].next = index;
  else
    q.head = index;
  q.tail = index;
}

void heartbeat_scheduler::unlink(std::uint32_t index) {
  slot& s = slots_[index];
  if (s.queue == none) return;
  fifo& q = queues_[s.queue];
  if (s.prev != none)
    slots_[s.prev].next = s.next;
  else
    q.head = s.next;
  if (s.next != none)
    slots_[s.next].prev = s.prev;
  else
    q.tail = s.prev;
  s.prev = s.next = s.queue = none;
}

void heartbeat_scheduler::free_slot(std::uint32_t index) {
  slots_[index].registrant = nullptr;  // its registrant may be gone now
  slots_[index].cancelled = false;
  free_.push_back(index);
}

void heartbeat_scheduler::cancel(std::uint32_t index) noexcept {
  std::lock_guard lock(mutex_);
  slot& s = slots_[index];
  if (s.running) {
    s.cancelled = true;  // the extending thread frees it when its call returns
    return;
  }
  unlink(index);
  free_slot(index);
}

// As the leader: sleeps until an entry is due and takes it. Returns none when stopping.
std::uint32_t heartbeat_scheduler::take_due(std::unique_lock<std::mutex>& lock) {
  while (!stopping_) {
    const auto now = clock::now();
    if (young_enabled_.load(std::memory_order_relaxed) && now >= last_scan_ + young_scan_) scan_young(now);
    std::uint32_t next = none;
    for (const fifo& q : queues_)
      if (q.head != none && (next == none || slots_[q.head].due < slots_[next].due)) next = q.head;
    if (next != none && slots_[next].due <= now) {
      unlink(next);
      slots_[next].running = true;
      return next;
    }
    if (next == none) forget_unused_periods(now);
    if (next != none) {
      leader_sleeps_until_ = slots_[next].due;
    } else if (idle_period_ != std::chrono::milliseconds::zero()) {
      // Idle. Wake again after the shortest recently used period instead of never: an entry
      // registered meanwhile with a period at least that long is then due no earlier than this
      // wake-up, so start() need not notify. Without it, every short call on an idle engine
      // (registered and cancelled before the leader ran) would cost a wake-up.
      leader_sleeps_until_ = now + idle_period_;
    } else {
      leader_sleeps_until_ = clock::time_point::max();
    }
    if (young_enabled_.load(std::memory_order_relaxed))
      leader_sleeps_until_ = std::min(leader_sleeps_until_, last_scan_ + young_scan_);
    if (leader_sleeps_until_ == clock::time_point::max())
      leader_wake_.wait(lock);
    else
      leader_wake_.wait_until(lock, leader_sleeps_until_);
    leader_sleeps_until_ = clock::time_point::min();  // awake: nobody needs to notify
  }
  return none;
}

// Under the lock, so the registrant (whose cancel needs the lock) cannot end meanwhile: the extend
// runs outside it, on a copy that stays valid even if the call ends during the extend.
void heartbeat_scheduler::own_identity(slot& s) {
  if (s.registrant == nullptr) return;
  if (s.id)
    *s.id = *s.registrant;  // reuses the strings' storage
  else
    s.id.emplace(*s.registrant);
  s.registrant = nullptr;
}

void heartbeat_scheduler::extend(std::uint32_t index, std::unique_lock<std::mutex>& lock) {
  bool failed = false;
  try {
    own_identity(slots_[index]);
  } catch (...) {
    failed = true;  // no memory for the copy: tried again like a failed extend
    log_({log_level::warning, fmt::format("could not prepare a heartbeat: {}", describe_current())});
  }
  if (!failed) {
    const identity& id = *slots_[index].id;  // stable: a running slot is neither freed nor reassigned
    const lease_token token = slots_[index].token;
    const auto lease = slots_[index].lease;
    lock.unlock();
    try {
      if (!store_.extend(id, token, lease))
        log_({log_level::debug,
              fmt::format("the lease on {} was no longer held when its heartbeat ran", id.to_string())});
    } catch (...) {
      // Retried soon (below); if every try fails the lease expires and may be stolen, and the holder
      // learns of it when complete or release throws lease_lost_error.
      failed = true;
      log_({log_level::warning,
            fmt::format("could not extend the lease on {}: {}", id.to_string(), describe_current())});
    }
    lock.lock();
  }
  slot& s = slots_[index];
  s.running = false;
  if (s.cancelled) {
    free_slot(index);
  } else {
    // After a failure the lease has at most half of it left: the next period would come too late,
    // so try again after a quarter period (the retries share a list of that delay, which keeps
    // every list ordered by due time).
    const auto delay = failed ? retry_delay(s.period) : s.period;
    const auto now = clock::now();
    s.due = now + delay;
    link(index, queue_for(delay, now));
    // The leader chose its wake-up while this entry was unlinked: it may sleep until the head of
    // a list with a longer period, past this entry's due time. Then it must wake earlier, as in
    // start(), or a short lease lapses while a long one is held.
    if (s.due < leader_sleeps_until_) {
      leader_sleeps_until_ = s.due;
      leader_wake_.notify_one();
    }
  }
}

void heartbeat_scheduler::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    ++idle_followers_;
    followers_.wait(lock, [&] { return stopping_ || !has_leader_; });
    --idle_followers_;
    if (stopping_) return;
    has_leader_ = true;
    const std::uint32_t index = take_due(lock);
    has_leader_ = false;
    if (index == none) return;  // stopping
    // Someone else leads while this thread extends: an idle follower, or a new thread.
    if (idle_followers_ > 0)
      followers_.notify_one();
    else if (threads_.size() < max_threads)
      try {
        threads_.emplace_back([this] { work(); });
      } catch (...) {
        // No thread to spare: the next due entry waits for this extend.
      }
    extend(index, lock);
  }
}

heartbeat_stripes::heartbeat_stripes(store& backing_store, const log_sink& log, std::size_t count) {
  count = std::max<std::size_t>(count, 1);
  stripes_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) stripes_.push_back(std::make_unique<heartbeat_scheduler>(backing_store, log));
}

heartbeat_scheduler& heartbeat_stripes::this_thread_stripe() {
  static std::atomic<std::size_t> threads_seen{0};
  thread_local const std::size_t thread_order = threads_seen.fetch_add(1, std::memory_order_relaxed);
  return *stripes_[thread_order % stripes_.size()];
}

heartbeat_scheduler::handle heartbeat_stripes::start(const identity& id, const lease_token& token,
                                                     std::chrono::milliseconds lease) {
  return this_thread_stripe().start(id, token, lease);
}

heartbeat_scheduler::handle heartbeat_stripes::start_here(const identity& id, const lease_token& token,
                                                          std::chrono::milliseconds lease) {
  return this_thread_stripe().start_here(id, token, lease);
}

std::size_t heartbeat_stripes::threads() const {
  std::size_t total = 0;
  for (const auto& stripe : stripes_) total += stripe->threads();
  return total;
}

std::size_t heartbeat_stripes::default_count() {
  return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
}

}  // namespace idem::detail
