// idem/memory_store.hpp — the embedded default store: one process, nothing survives a restart.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>

#include <idem/function_ref.hpp>
#include <idem/detail/waiter_count.hpp>
#include <idem/store.hpp>

namespace idem {
namespace detail {
class timer_queue;
}

// Settings of a memory_store.
struct memory_store_options {
  std::size_t shards = 64;  // independent locks; rounded up to a power of two, at least 1
};

// idem::memory_store
//
// Records live in a sharded hash map, each shard behind its own mutex. A duplicate registers as a
// waiter of its shard and is answered when the record completes or is released, or by a timer at
// its deadline or the holder's lease expiry: no polling, and an asynchronous duplicate
// (async_try_acquire) occupies no thread. The timers run on one thread of the store, started with
// the first wait. Destroying the store answers callers still waiting with store_unavailable_error.
// Complete records past their ttl are treated as absent and dropped on the next acquisition;
// purge_expired() sweeps the rest. Uses the process's steady clock for leases and expiry and the
// system clock for completed_at, read as of the kernel's last tick (Linux: up to 4 ms early); a
// replay of a record more than a few ticks from its expiry reads only the kernel's coarse copy of
// the steady clock, which is cheaper and cannot make a record outlive its ttl. Not transactional.
class memory_store final : public store {
 public:
  explicit memory_store(memory_store_options options = {});
  ~memory_store() override;
  memory_store(const memory_store&) = delete;
  memory_store& operator=(const memory_store&) = delete;

  acquire_result try_acquire(const context& ctx) override;
  // Always an answer, except when ctx waits for a holder.
  std::optional<acquire_result> try_acquire_at_once(const context& ctx) override;
  void complete(const identity& id, const lease_token& token, const payload& value,
                std::chrono::milliseconds ttl) override;
  void release(const identity& id, const lease_token& token) override;
  bool extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) override;
  std::size_t purge_expired() override;
  std::size_t waiting() const noexcept override { return waiters_.get(); }
  std::string_view name() const noexcept override { return "memory_store"; }
  bool in_process() const noexcept override { return true; }

  // Native: no thread is taken for a call; complete and release answer before returning.
  void async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) override;
  void async_complete(const identity& id, const lease_token& token, const payload& value,
                      std::chrono::milliseconds ttl, async_done done) override;
  void async_release(const identity& id, const lease_token& token, async_done done) override;

  // How many records the store holds, expired ones included. For tests and metrics.
  std::size_t size() const;

 private:
  struct shard;
  struct waiter;
  struct ready_list;  // answers to hand to waiters once their shard's lock is released
  // The shard owning the records whose identities hash to `hash` (identity::hash).
  shard& shard_for(std::size_t hash) const;

  // Under the shard's lock: looks at ctx's record once. Returns true with `answered` set when the
  // claim is answered without waiting (a zero wait answers in flight); false when it would wait for
  // the holder, whose lease runs until `held_until` (`now`: the clock's reading).
  static bool look_once_locked(shard& s, const context& ctx, acquire_result& answered,
                               std::chrono::steady_clock::time_point& held_until,
                               std::chrono::steady_clock::time_point& now);
  // Looks at ctx's record once. Returns true with `answered` set, or registers a waiter whose
  // handler `make_handler` builds (called only then) and returns false: the handler runs once,
  // from the thread that completes, releases or purges the record, from the timer thread, or from
  // the thread requesting `cancel`.
  bool look_or_wait(const context& ctx, cancellation* cancel,
                    function_ref<async_handler<acquire_result>()> make_handler, acquire_result& answered);
  // Under the shard's lock: the waiters of `id`'s record (every waiter when null) look again;
  // those answered move to `ready`.
  void relook_locked(shard& s, const identity* id, ready_list& ready);
  // Looks again for waiter `index`; answered, it moves to `ready` (true); else its timer is set.
  bool settle_locked(shard& s, std::size_t index, std::chrono::steady_clock::time_point now, ready_list& ready);
  void arm_locked(shard& s, std::size_t index, std::chrono::steady_clock::time_point wake);
  std::shared_ptr<waiter> take_locked(shard& s, std::size_t index);
  static std::optional<std::size_t> find_locked(const shard& s, const std::weak_ptr<waiter>& who);
  void on_timer(shard& s, const std::weak_ptr<waiter>& who);
  void on_cancel(shard& s, const std::weak_ptr<waiter>& who);
  static void answer(ready_list& ready);

  std::unique_ptr<shard[]> shards_;
  std::size_t shard_mask_;
  detail::waiter_count waiters_;
  std::unique_ptr<detail::timer_queue> timers_;
};

}  // namespace idem
