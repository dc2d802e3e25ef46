// runtime/memory/memory_store.cpp — idem::memory_store, the embedded default store: its entry points.
//
// Layout: a power-of-two array of shards. A record lives in the shard its identity's hash
// (identity::hash, computed once per call and kept by the identity) selects. Each shard is one
// std::mutex, one std::unordered_map and a list of waiters, so every operation takes exactly one
// lock. How a record is kept and the rule that looks at one: records.hpp. Waiting
// (waiting.cpp): a duplicate that finds the record held waits on its shard for the holder; a
// blocking try_acquire waits for its waiter's handler. Leases and expiry use steady_clock;
// completed_at is the system clock as of the kernel's last tick (detail::coarse_system_now). A
// replay of a record far from its expiry reads only the kernel's coarse clock
// (detail::surely_in_future).
#include "store_parts.hpp"

#include <algorithm>
#include <bit>
#include <condition_variable>
#include <cstdint>
#include <string>
#include <string_view>

#include <idem/errors.hpp>

#include "../core/caught.hpp"
#include "../core/waiting_call.hpp"

namespace idem {

using detail::memory::looked_up;

namespace {

enum class lease_lost_reason { absent, complete, other_token };

// Why `token` does not own the lease of the record at `it` (end(): no record), or nothing if it does.
// Under the shard's lock.
std::optional<lease_lost_reason> lease_lost_on(const detail::memory::record_map& records,
                                               detail::memory::record_map::const_iterator it,
                                               const lease_token& token) noexcept {
  if (it == records.end()) return lease_lost_reason::absent;
  if (it->second.complete) return lease_lost_reason::complete;
  if (it->second.token != token) return lease_lost_reason::other_token;
  return std::nullopt;
}

[[noreturn]] void throw_lease_lost(std::string_view operation, const identity& id, lease_lost_reason reason) {
  const std::string record = id.to_string();
  std::string message = "cannot ";
  message += operation;
  message += ' ';
  message += record;
  switch (reason) {
    case lease_lost_reason::absent:
      message += ": no record exists (it was released, purged or never acquired)";
      break;
    case lease_lost_reason::complete:
      message += ": the record is already complete, so no lease owns it";
      break;
    case lease_lost_reason::other_token:
      message += ": the lease no longer owns the record (it expired and was taken over)";
      break;
  }
  throw lease_lost_error(message, std::string(operation), record);
}

std::size_t shard_count_for(std::size_t requested) noexcept {
  constexpr std::size_t max_shards = std::size_t{1} << 16;
  return std::bit_ceil(std::clamp<std::size_t>(requested, 1, max_shards));
}

// Spreads a hash over the shard bits (std::hash of a string is good, but its low bits also pick
// the bucket inside the shard's map; mixing keeps the two choices independent).
std::size_t shard_index(std::size_t hash, std::size_t mask) noexcept {
  std::uint64_t h = hash;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<std::size_t>(h) & mask;
}

}  // namespace

memory_store::memory_store(memory_store_options options)
    : shards_(std::make_unique<shard[]>(shard_count_for(options.shards))),
      shard_mask_(shard_count_for(options.shards) - 1),
      timers_(std::make_unique<detail::timer_queue>()) {}

memory_store::~memory_store() {
  // No timer fires from here on; callers still waiting are answered, so none hangs.
  timers_->stop();
  ready_list ready;
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    shard& s = shards_[i];
    std::lock_guard lock(s.mutex);
    while (!s.waiters.empty()) {
      const identity& id = s.waiters.back()->ctx.id;
      std::exception_ptr destroyed = std::make_exception_ptr(detail::destroyed_while_waiting("memory_store", id));
      ready.add(take_locked(s, s.waiters.size() - 1), std::move(destroyed));
    }
  }
  answer(ready);
}

memory_store::shard& memory_store::shard_for(std::size_t hash) const {
  return shards_[shard_index(hash, shard_mask_)];
}

acquire_result memory_store::try_acquire(const context& ctx) {
  // The waiter's handler hands the answer to this thread; built only when the call waits, so that
  // a call answered at once pays for no mutex or condition variable.
  struct blocking_wait {
    std::mutex mutex;
    std::condition_variable answered;
    bool done = false;
    std::exception_ptr error;
    acquire_result result{in_flight{}};
  };
  std::optional<blocking_wait> wait;
  acquire_result answer{in_flight{}};  // the one object returned: no move of a replay's payload
  if (!look_or_wait(ctx, nullptr,
                   [&]() -> async_handler<acquire_result> {
                     blocking_wait& w = wait.emplace();
                     return [&w](std::exception_ptr error, acquire_result result) {
                       std::lock_guard lock(w.mutex);
                       w.error = std::move(error);
                       w.result = std::move(result);
                       w.done = true;
                       w.answered.notify_one();  // under the lock: `w` lives until it is released
                     };
                   },
                   answer)) {
    std::unique_lock lock(wait->mutex);
    wait->answered.wait(lock, [&] { return wait->done; });
    if (wait->error) std::rethrow_exception(std::move(wait->error));
    answer = std::move(wait->result);
  }
  return answer;
}

std::optional<acquire_result> memory_store::try_acquire_at_once(const context& ctx) {
  shard& s = shard_for(ctx.id.hash());
  std::optional<acquire_result> answer(std::in_place, in_flight{});
  std::lock_guard lock(s.mutex);
  steady::time_point held_until{}, now{};
  if (!look_once_locked(s, ctx, *answer, held_until, now)) answer.reset();
  return answer;
}

void memory_store::async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) {
  bool handed_over = false;
  bool answered = false;
  acquire_result answer{in_flight{}};
  std::exception_ptr error = detail::caught([&] {
    answered = look_or_wait(ctx, cancel,
                            [&] {
                              handed_over = true;
                              return std::move(done);
                            },
                            answer);
  });
  if (handed_over) return;  // the waiter answers, whatever happened after it took the handler
  if (error) return done(std::move(error), acquire_result{in_flight{}});
  if (answered) done(nullptr, std::move(answer));
}

void memory_store::complete(const identity& id, const lease_token& token, const payload& value,
                            std::chrono::milliseconds ttl) {
  const looked_up key(id);
  shard& s = shard_for(key.hash);

  // Copied before locking: a large body does not lengthen the critical section.
  std::unique_ptr<const payload> copy = value.is_none() ? nullptr : std::make_unique<const payload>(value);
  std::optional<lease_lost_reason> lost;
  ready_list ready;
  {
    std::lock_guard lock(s.mutex);
    const auto it = s.records.find(key);
    lost = lease_lost_on(s.records, it, token);
    if (!lost) {
      detail::memory::stored_record& record = it->second;
      record.value = std::move(copy);  // null for none
      record.complete = true;
      record.token = lease_token{};
      record.completed_at = detail::coarse_system_now();  // reported only: a tick is precise enough
      record.expires = saturating_add(steady::now(), ttl);
      relook_locked(s, &id, ready);
    }
  }
  answer(ready);
  if (lost) throw_lease_lost("complete", id, *lost);
}

void memory_store::release(const identity& id, const lease_token& token) {
  const looked_up key(id);
  shard& s = shard_for(key.hash);

  std::optional<lease_lost_reason> lost;
  ready_list ready;
  {
    std::lock_guard lock(s.mutex);
    const auto it = s.records.find(key);
    lost = lease_lost_on(s.records, it, token);
    if (!lost) {
      s.records.erase(it);
      relook_locked(s, &id, ready);  // the first waiter acquires it afresh
    }
  }
  answer(ready);
  if (lost) throw_lease_lost("release", id, *lost);
}

// The memory store's operations finish at once: the asynchronous ones answer before returning.
void memory_store::async_complete(const identity& id, const lease_token& token, const payload& value,
                                  std::chrono::milliseconds ttl, async_done done) {
  std::exception_ptr error;
  try {
    complete(id, token, value, ttl);
  } catch (...) {
    error = std::current_exception();
  }
  done(error);
}

void memory_store::async_release(const identity& id, const lease_token& token, async_done done) {
  std::exception_ptr error;
  try {
    release(id, token);
  } catch (...) {
    error = std::current_exception();
  }
  done(error);
}

bool memory_store::extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) {
  const looked_up key(id);
  shard& s = shard_for(key.hash);

  std::lock_guard lock(s.mutex);
  const auto it = s.records.find(key);
  if (lease_lost_on(s.records, it, token)) return false;
  // Waiters whose timer is due at the old expiry wake then, see the new one and wait again.
  it->second.lease_expires = saturating_add(steady::now(), lease);
  return true;
}

std::size_t memory_store::purge_expired() {
  std::size_t purged = 0;
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    shard& s = shards_[i];
    ready_list ready;
    {
      std::lock_guard lock(s.mutex);
      const steady::time_point now = steady::now();
      const std::size_t removed =
          std::erase_if(s.records, [now](const auto& entry) { return entry.second.purgeable(now); });
      if (removed > 0) relook_locked(s, nullptr, ready);
      purged += removed;
    }
    answer(ready);
  }
  return purged;
}

std::size_t memory_store::size() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    shard& s = shards_[i];
    std::lock_guard lock(s.mutex);
    total += s.records.size();
  }
  return total;
}
}  // namespace idem
