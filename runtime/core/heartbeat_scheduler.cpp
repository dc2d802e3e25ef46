#include "heartbeat_scheduler.hpp"

#include <algorithm>

namespace idem::detail {

heartbeat_scheduler::heartbeat_scheduler(store& backing_store) : store_(backing_store) {
  thread_ = std::thread([this] { run(); });
}

heartbeat_scheduler::~heartbeat_scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
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
  const auto period = lease / 2;
  const auto due = clock::now() + period;
  bool notify = false;
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
    s.id = &id;
    s.token = token;
    s.lease = lease;
    s.due = due;
    s.ticking = false;
    s.cancelled = false;
    std::uint32_t queue = none;
    for (std::uint32_t q = 0; q < queues_.size(); ++q)
      if (queues_[q].period == period) queue = q;
    if (queue == none) {
      queue = static_cast<std::uint32_t>(queues_.size());
      queues_.push_back(fifo{period});
      min_period_ = std::min(min_period_, period);
    }
    link(index, queue);
    // Wake the thread only if it sleeps past this entry's due time; usually it does not need to.
    if (due < sleeping_until_) {
      sleeping_until_ = due;
      notify = true;
    }
  }
  if (notify) wake_.notify_one();
  return handle(this, index);
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

void heartbeat_scheduler::cancel(std::uint32_t index) noexcept {
  std::unique_lock lock(mutex_);
  slot& s = slots_[index];
  if (s.ticking) {
    // The thread is extending this lease outside the lock; wait so that the identity the caller
    // owns is not touched after we return.
    s.cancelled = true;
    tick_done_.wait(lock, [&] { return !s.ticking; });
  }
  unlink(index);
  s.id = nullptr;
  free_.push_back(index);
}

void heartbeat_scheduler::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    // The earliest entry is at the head of one of the per-period lists.
    std::uint32_t next = none;
    for (const fifo& q : queues_)
      if (q.head != none && (next == none || slots_[q.head].due < slots_[next].due)) next = q.head;
    const auto now = clock::now();
    if (next == none || slots_[next].due > now) {
      if (next != none) {
        sleeping_until_ = slots_[next].due;
      } else if (min_period_ != std::chrono::milliseconds::max()) {
        // Idle. Wake again after the shortest period ever registered instead of never: an entry
        // registered meanwhile with a period at least that long is then due no earlier than this
        // wake-up, so start() need not notify. Without it, every short call on an idle engine
        // (registered and cancelled before this thread ran) would cost a wake-up of this thread.
        sleeping_until_ = now + min_period_;
      } else {
        sleeping_until_ = clock::time_point::max();
      }
      if (sleeping_until_ == clock::time_point::max())
        wake_.wait(lock);
      else
        wake_.wait_until(lock, sleeping_until_);
      sleeping_until_ = clock::time_point::min();  // awake: nobody needs to notify us
      continue;
    }
    slot& s = slots_[next];
    const std::uint32_t queue = s.queue;
    unlink(next);
    s.ticking = true;
    const identity* id = s.id;
    const lease_token token = s.token;
    const auto lease = s.lease;
    lock.unlock();
    try {
      store_.extend(*id, token, lease);
    } catch (...) {
      // A failed extension only means the lease may expire and be stolen; the holder learns of
      // it when complete or release throws lease_lost_error.
    }
    lock.lock();
    slot& after = slots_[next];
    after.ticking = false;
    if (after.cancelled) {
      tick_done_.notify_all();
    } else {
      after.due = clock::now() + after.lease / 2;
      link(next, queue);
    }
  }
}

}  // namespace idem::detail
