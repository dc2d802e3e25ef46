// runtime/memory/waiting.cpp — memory_store's duplicates that wait for a record's holder.
//
// A duplicate that finds the record held registers a waiter on its shard (blocking callers and
// asynchronous ones alike) and a timer at the sooner of its deadline and the holder's lease
// expiry. A complete, release or purge re-looks for the shard's waiters of that record (under the
// shard's lock, so the answer is the record's state at that moment) and answers those it can; a
// timer re-looks and steals an expired lease or answers in flight; a cancellation answers
// operation_cancelled. Handlers run after the lock is released.
#include "store_parts.hpp"

#include <algorithm>

#include <idem/errors.hpp>

namespace idem {

using detail::memory::clock_reading;
using detail::memory::look;

void memory_store::answer(ready_list& ready) {
  for (ready_list::entry& e : ready.entries) {
    if (e.who->cancel != nullptr) e.who->cancel->clear();
    e.who->done(std::move(e.error), std::move(e.result));
  }
  ready.entries.clear();
}

std::shared_ptr<memory_store::waiter> memory_store::take_locked(shard& s, std::size_t index) {
  std::shared_ptr<waiter> w = std::move(s.waiters[index]);
  s.waiters[index] = std::move(s.waiters.back());
  s.waiters.pop_back();
  timers_->cancel(w->timer);
  w->counted.reset();
  return w;
}

bool memory_store::settle_locked(shard& s, std::size_t index, steady::time_point now, ready_list& ready) {
  waiter& w = *s.waiters[index];
  acquire_result answer{in_flight{}};
  steady::time_point held_until{};
  clock_reading clock(now);
  const bool answered = look(s.records, w.ctx, clock, answer, held_until);
  if (!answered && now >= w.deadline) answer = in_flight{remaining_lease(held_until, now)};
  if (answered || now >= w.deadline) {
    ready.add(take_locked(s, index), std::move(answer));
    return true;
  }
  arm_locked(s, index, std::min(w.deadline, held_until));
  return false;
}

void memory_store::arm_locked(shard& s, std::size_t index, steady::time_point wake) {
  waiter& w = *s.waiters[index];
  if (w.timer && w.timer.at == wake) return;
  timers_->cancel(w.timer);
  w.timer = timers_->schedule(wake, [this, &s, weak = std::weak_ptr<waiter>(s.waiters[index])] { on_timer(s, weak); });
}

void memory_store::relook_locked(shard& s, const identity* id, ready_list& ready) {
  if (s.waiters.empty()) return;
  const steady::time_point now = steady::now();
  for (std::size_t i = 0; i < s.waiters.size();) {
    if (id != nullptr && !(s.waiters[i]->ctx.id == *id)) {
      ++i;
      continue;
    }
    if (!settle_locked(s, i, now, ready)) ++i;  // a taken waiter's place holds the last one now
  }
}

std::optional<std::size_t> memory_store::find_locked(const shard& s, const std::weak_ptr<waiter>& who) {
  const std::shared_ptr<waiter> w = who.lock();
  if (!w) return std::nullopt;
  for (std::size_t i = 0; i < s.waiters.size(); ++i) {
    if (s.waiters[i] == w) return i;
  }
  return std::nullopt;
}

void memory_store::on_timer(shard& s, const std::weak_ptr<waiter>& who) {
  ready_list ready;
  {
    std::lock_guard lock(s.mutex);
    if (const auto index = find_locked(s, who)) {
      s.waiters[*index]->timer = {};  // this one fired
      settle_locked(s, *index, steady::now(), ready);
    }
  }
  answer(ready);
}

void memory_store::on_cancel(shard& s, const std::weak_ptr<waiter>& who) {
  ready_list ready;
  {
    std::lock_guard lock(s.mutex);
    if (const auto index = find_locked(s, who)) {
      ready.add(take_locked(s, *index), std::make_exception_ptr(operation_cancelled()));
    }
  }
  answer(ready);
}

bool memory_store::look_once_locked(shard& s, const context& ctx, acquire_result& answered,
                                    steady::time_point& held_until, steady::time_point& now) {
  clock_reading clock;
  if (look(s.records, ctx, clock, answered, held_until)) return true;
  now = clock.now();
  if (ctx.wait > std::chrono::milliseconds::zero()) return false;
  answered = in_flight{remaining_lease(held_until, now)};
  return true;
}

bool memory_store::look_or_wait(const context& ctx, cancellation* cancel,
                                function_ref<async_handler<acquire_result>()> make_handler,
                                acquire_result& answered) {
  shard& s = shard_for(ctx.id.hash());
  std::shared_ptr<waiter> refused;  // cancelled before it could wait
  {
    std::lock_guard lock(s.mutex);
    steady::time_point held_until{}, now{};
    if (look_once_locked(s, ctx, answered, held_until, now)) return true;
    auto w = std::make_shared<waiter>(ctx, cancel, make_handler());
    w->deadline = saturating_add(now, ctx.wait);
    if (cancel != nullptr &&
        !cancel->install([this, &s, weak = std::weak_ptr<waiter>(w)] { on_cancel(s, weak); })) {
      refused = std::move(w);
    } else {
      w->counted.emplace(waiters_);
      w->counted->begin();  // under the shard's lock: a complete that follows finds it waiting
      s.waiters.push_back(w);
      arm_locked(s, s.waiters.size() - 1, std::min(w->deadline, held_until));
    }
  }
  if (refused) refused->done(std::make_exception_ptr(operation_cancelled()), acquire_result{in_flight{}});
  return false;
}

}  // namespace idem
