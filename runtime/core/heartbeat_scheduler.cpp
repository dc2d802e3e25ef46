// runtime/core/heartbeat_scheduler.cpp — the lease-extending thread pool of one engine.
#include "heartbeat_scheduler.hpp"

#include <algorithm>
#include <atomic>
#include <exception>

#include <fmt/format.h>

namespace idem::detail {

namespace {

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

heartbeat_scheduler::heartbeat_scheduler(store& backing_store, log_sink log, std::chrono::milliseconds forget_after)
    : store_(backing_store), log_(std::move(log)), forget_after_(forget_after) {
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
    other.owner_ = nullptr;
  }
  return *this;
}

void heartbeat_scheduler::handle::cancel() noexcept {
  if (owner_ == nullptr) return;
  owner_->cancel(slot_);
  owner_ = nullptr;
}

heartbeat_scheduler::handle heartbeat_scheduler::start(const identity& id, const lease_token& token,
                                                       std::chrono::milliseconds lease) {
  const auto period = std::max(lease / 2, std::chrono::milliseconds(1));
  const auto now = clock::now();
  const auto due = now + period;
  bool wake_leader = false;
  std::uint32_t index;
  {
    std::lock_guard lock(mutex_);
    if (free_.empty()) {
      index = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      index = free_.back();
      free_.pop_back();
    }
    slot& s = slots_[index];
    s.registrant = &id;
    s.token = token;
    s.lease = lease;
    s.period = period;
    s.due = due;
    s.running = false;
    s.cancelled = false;
    link(index, queue_for(period, now));
    // Wake the leader only if it sleeps past this entry's due time; usually it does not.
    if (due < leader_sleeps_until_) {
      leader_sleeps_until_ = due;
      wake_leader = true;
    }
  }
  if (wake_leader) leader_wake_.notify_one();
  return handle(this, index);
}

std::size_t heartbeat_scheduler::threads() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
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
    std::uint32_t next = none;
    for (const fifo& q : queues_)
      if (q.head != none && (next == none || slots_[q.head].due < slots_[next].due)) next = q.head;
    const auto now = clock::now();
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

heartbeat_scheduler::handle heartbeat_stripes::start(const identity& id, const lease_token& token,
                                                     std::chrono::milliseconds lease) {
  static std::atomic<std::size_t> threads_seen{0};
  thread_local const std::size_t thread_order = threads_seen.fetch_add(1, std::memory_order_relaxed);
  return stripes_[thread_order % stripes_.size()]->start(id, token, lease);
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
