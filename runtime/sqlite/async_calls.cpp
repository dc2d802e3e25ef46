// runtime/sqlite/async_calls.cpp — sqlite_store's asynchronous calls, on two threads of its own.
#include "store_parts.hpp"

#include "../core/caught.hpp"
#include "../core/waiting_call.hpp"

namespace idem {

// One asynchronous try_acquire: attempts (acquire_attempts::next) on the store's workers, waits as
// a registration on the record's waiters plus a timer. Every step but the attempt itself runs under
// the lock (detail::waiting_call: cancellation, the store's destruction, stale wake-ups).
struct sqlite_store::async_acquire : detail::waiting_call<async_acquire> {
  async_acquire(sqlite_store& store, const context& c, cancellation* cancel_request,
                async_handler<acquire_result> handler)
      : waiting_call(c, cancel_request, std::move(handler), &store.state_->pending),
        owner(store),
        s(*store.state_),
        deadline(deadline_after(ctx.wait)) {}

  sqlite_store& owner;
  state& s;
  const steady::time_point deadline;

  bool attempting = false;  // an attempt runs now, outside the lock: `attempts` must stay
  std::optional<acquire_attempts> attempts;
  detail::timer_queue::timer timer;

  void start() {
    if (begin("sqlite_store")) post_attempt();
  }

  void post_attempt() {
    if (std::exception_ptr failed = detail::caught([&] { s.workers.post([self = shared_from_this()] { self->attempt(); }); }))
      end_early(std::move(failed));
  }

  // On a worker: one look (and claim), then the answer or the next wait.
  void attempt() {
    {
      std::lock_guard lock(mutex);
      if (finished) return;
      attempting = true;
    }
    std::exception_ptr error;
    acquire_attempts::step next{acquire_result{in_flight{}}};
    try {
      if (!attempts) attempts.emplace(s, ctx, deadline);
      next = attempts->next();
    } catch (const sqlite_failure& f) {
      try {
        s.unavailable("try_acquire", &ctx.id, f.what());
      } catch (...) {
        error = std::current_exception();
      }
    } catch (...) {
      error = std::current_exception();
    }
    std::unique_lock lock(mutex);
    attempting = false;
    if (finished) {  // cancelled, or the store is going: a record claimed meanwhile is given back
      attempts.reset();
      lock.unlock();
      auto* answer = std::get_if<acquire_result>(&next);
      auto* got = answer != nullptr ? std::get_if<acquired>(answer) : nullptr;
      if (got != nullptr && error == nullptr) release_quietly(got->token);
      return;
    }
    if (error) return finish(lock, std::move(error), acquire_result{in_flight{}});
    if (auto* answer = std::get_if<acquire_result>(&next)) return finish(lock, nullptr, std::move(*answer));
    const auto wait = std::get<acquire_attempts::wait_for>(next);
    const std::uint64_t current = arm_locked();
    auto self = shared_from_this();
    if (!attempts->enrollment().notify_on_change(wait.seen, [self, current] { self->woken(current, true); })) {
      attempts->woken(true);  // it moved already
      lock.unlock();
      post_attempt();
      return;
    }
    if (std::exception_ptr failed = detail::caught(
            [&] { timer = s.timers.schedule(wait.until, [self, current] { self->woken(current, false); }); }))
      finish(lock, std::move(failed), acquire_result{in_flight{}});
  }

  // The record changed (`notified`) or the wait's time came.
  void woken(std::uint64_t which, bool notified) {
    {
      std::lock_guard lock(mutex);
      if (!take_wake_locked(which)) return;
      attempts->woken(notified);
    }
    post_attempt();
  }

  void stop_waiting_locked() {
    if (timer) s.timers.cancel(timer);
    timer = {};
    if (attempts) attempts->enrollment().cancel_notify();
  }

  void let_go_locked() {
    if (!attempting) attempts.reset();  // else the attempt running now lets go of it
  }

  // A store being destroyed keeps the record in progress until its lease expires.
  void release_quietly(const lease_token& token) {
    if (store_stopping()) return;
    try {
      owner.release(ctx.id, token);
    } catch (...) {
      // It stays in progress until its lease expires.
    }
  }
};

sqlite_store::state::~state() {
  const auto left = pending.take_all();
  timers.stop();  // drops the waits' timers: they are answered here
  for (const auto& op : left)
    op->end_early(std::make_exception_ptr(detail::destroyed_while_waiting("sqlite_store", op->ctx.id)));
}

void sqlite_store::async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) {
  std::make_shared<async_acquire>(*this, ctx, cancel, std::move(done))->start();
}

void sqlite_store::async_complete(const identity& id, const lease_token& token, const payload& value,
                                  milliseconds ttl, async_done done) {
  state_->workers.run_and_report([this, id, token, value, ttl] { complete(id, token, value, ttl); }, std::move(done));
}

void sqlite_store::async_release(const identity& id, const lease_token& token, async_done done) {
  state_->workers.run_and_report([this, id, token] { release(id, token); }, std::move(done));
}

}  // namespace idem
