// runtime/core/waiting_call.hpp — what every store's asynchronous try_acquire shares beside its own
// protocol: one answer, given once, to a caller that may cancel, from a store that may be
// destroyed, while wake-ups (a notification, a timer, a late reply) race to give it.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include <idem/async.hpp>
#include <idem/context.hpp>
#include <idem/errors.hpp>
#include <idem/store.hpp>

#include "pending_calls.hpp"

namespace idem::detail {

// What a caller whose store is destroyed while it waits is answered: `store` ("sqlite_store")
// names the store, the record renders as Scope/#xxxxxxxx.
store_unavailable_error destroyed_while_waiting(std::string_view store, const identity& id);

// True when a call for `ctx` can be cancelled: it was given a cancellation and may wait.
inline bool can_cancel(const cancellation* cancel, const context& ctx) noexcept {
  return cancel != nullptr && ctx.wait > std::chrono::milliseconds(0);
}

// idem::detail::waiting_call<Call>
//
// The base of a store's asynchronous try_acquire `Call` (CRTP; create it with std::make_shared or
// allocate_shared). Every step runs under `mutex`; the first step to end the call wins, and
// `generation` tells a wake-up that is still current from one that lost the race. `Call` provides
//   void stop_waiting_locked();  // cancels its timer and its notification, if armed
//   void let_go_locked();        // drops its step machine, or leaves it to a look still out
// and may provide
//   void abandon_locked();       // the call ends early: tells its machine nobody will look again
// all called with the lock held. A call registered with its store's pending_calls (`pending`, may
// be null) is answered by the store's destructor through end_early(destroyed_while_waiting(...)).
template <class Call>
class waiting_call : public std::enable_shared_from_this<Call> {
 public:
  // The call was cancelled, or its store is going: ends it with `why`, unless it ended already.
  void end_early(std::exception_ptr why) {
    std::unique_lock lock(mutex);
    if (finished) return;
    if constexpr (requires(Call& c) { c.abandon_locked(); }) self().abandon_locked();
    finish(lock, std::move(why), acquire_result{in_flight{}});
  }

  const context ctx;  // a copy: the caller's may be gone before the answer
  cancellation* const cancel;

 protected:
  waiting_call(const context& c, cancellation* cancel_request, async_handler<acquire_result> handler,
               pending_calls<Call>* pending) noexcept
      : ctx(c), cancel(cancel_request), pending_(pending), done_(std::move(handler)) {}

  // Installs the caller's cancellation and registers the call with its store. False when the call
  // ended here (it was cancelled already, or the store is going) and must take no step.
  [[nodiscard]] bool begin(std::string_view store) {
    if (can_cancel(cancel, ctx) && !cancel->install([weak = this->weak_from_this()] {
          if (const std::shared_ptr<Call> call = weak.lock()) call->end_early(std::make_exception_ptr(operation_cancelled()));
        })) {
      report(std::make_exception_ptr(operation_cancelled()), acquire_result{in_flight{}});
      return false;
    }
    if (pending_ != nullptr && !pending_->add(this->shared_from_this())) {
      end_early(std::make_exception_ptr(destroyed_while_waiting(store, ctx.id)));
      return false;
    }
    return true;
  }

  // The generation of a wake-up armed now; every one armed before is stale from here on. Lock held.
  [[nodiscard]] std::uint64_t arm_locked() noexcept { return ++generation; }

  // Whether a wake-up armed at `which` is still current. If it is, the others armed with it (the
  // timer beside the notification) are made stale and disarmed. Lock held.
  [[nodiscard]] bool take_wake_locked(std::uint64_t which) {
    if (finished || which != generation) return false;
    ++generation;
    self().stop_waiting_locked();
    return true;
  }

  // Ends the call with its answer: called with the lock held, answers without it.
  void finish(std::unique_lock<std::mutex>& lock, std::exception_ptr error, acquire_result result) {
    finished = true;
    ++generation;
    self().stop_waiting_locked();
    self().let_go_locked();
    lock.unlock();
    const std::shared_ptr<Call> keep = this->shared_from_this();  // the pending set may hold the last one
    if (pending_ != nullptr) pending_->remove(keep);
    if (can_cancel(cancel, ctx)) cancel->clear();
    report(std::move(error), std::move(result));
  }

  // Whether the store is going (its pending calls were taken): a record acquired late is then
  // left to its lease rather than released.
  [[nodiscard]] bool store_stopping() const { return pending_ != nullptr && pending_->stopping(); }

  std::mutex mutex;
  bool finished = false;
  std::uint64_t generation = 0;

 private:
  Call& self() noexcept { return static_cast<Call&>(*this); }

  void report(std::exception_ptr error, acquire_result result) {
    async_handler<acquire_result> handler = std::move(done_);
    handler(std::move(error), std::move(result));
  }

  pending_calls<Call>* const pending_;
  async_handler<acquire_result> done_;
};

}  // namespace idem::detail
