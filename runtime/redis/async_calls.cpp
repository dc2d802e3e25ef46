// runtime/redis/async_calls.cpp — redis_store's asynchronous entry points: the protocol of
// protocol.cpp and the wait of record_wait.cpp driven by replies, messages and timers instead of
// a blocked thread.
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <variant>

#include <idem/async.hpp>
#include <idem/detail/recycled.hpp>

#include "../core/caught.hpp"
#include "../core/waiting_call.hpp"
#include "record_wait.hpp"
#include "store_impl.hpp"

namespace idem {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

// One asynchronous try_acquire: its looks, and its wait when the record is busy. Every step runs
// under the lock; whatever may call back at once (a script call) starts after it is released.
// Looks, messages, timers and a cancellation request race (detail::waiting_call).
struct redis_store::impl::async_acquire : detail::waiting_call<async_acquire> {
  async_acquire(impl& store, const context& c, std::string key, cancellation* cancel_request,
                async_handler<acquire_result> handler)
      : waiting_call(c, cancel_request, std::move(handler), nullptr), d(store), request(store, ctx, std::move(key)) {}

  impl& d;
  const acquire_request request;

  std::optional<script_call> call;  // the look in flight, or the last one
  steady::time_point sent_at;
  steady::time_point deadline;  // the first look's sending plus ctx.wait: one clock read for both
  std::optional<record_wait> wait;
  event_loop::id timer = 0;
  // Itself while a look is in flight (one at a time), so that the look's handler holds only `this`:
  // std::function keeps a pointer inline, and allocates for a handler that holds a shared_ptr.
  std::shared_ptr<async_acquire> kept_until_answered;

  void start() {
    if (!begin("redis_store")) return;
    {
      std::lock_guard lock(mutex);
      call.emplace(d, target{"try_acquire", &ctx.id}, rd::scripts().acquire, request.keys, request.args, false);
      sent_at = steady::now();
      deadline = saturating_add(sent_at, ctx.wait);
    }
    look();
  }

  // Sends the look prepared in `call`.
  void look() {
    kept_until_answered = shared_from_this();
    d.run_async(*call, [this](std::exception_ptr error, outcome out) {
      const std::shared_ptr<async_acquire> self = std::move(kept_until_answered);
      looked(std::move(error), std::move(out));
    });
  }

  void looked(std::exception_ptr error, outcome out) {
    std::unique_lock lock(mutex);
    if (finished) {
      lock.unlock();
      give_back(error, out);
      return;
    }
    record_wait::step next;
    std::optional<acquire_result> answer;
    if (std::exception_ptr failed = detail::caught([&] {
          if (error) std::rethrow_exception(error);
          impl::look seen = d.read_look(ctx, request, out, sent_at);
          if (!wait) {
            if (!seen.busy || ctx.wait <= milliseconds{0}) {
              answer = std::move(seen.answer);
              return;
            }
            wait.emplace(d, ctx, request.key, std::move(seen), deadline);
            next = wait->start();
          } else {
            next = wait->looked(std::move(seen));
          }
        }))
      return finish(lock, std::move(failed), acquire_result{in_flight{}});
    if (answer) return finish(lock, nullptr, std::move(*answer));
    advance(lock, std::move(next));
  }

  // Takes the machine's next step. Called with the lock held; releases it.
  void advance(std::unique_lock<std::mutex>& lock, record_wait::step next) {
    std::exception_ptr failed = detail::caught([&] {
      for (;;) {
        if (auto* answered = std::get_if<record_wait::answer>(&next)) {
          return finish(lock, nullptr, std::move(answered->result));
        }
        if (std::holds_alternative<record_wait::look_request>(next)) {
          call.emplace(d, target{"try_acquire", &ctx.id}, rd::scripts().acquire, request.keys, request.args, false);
          sent_at = steady::now();
          lock.unlock();
          look();
          return;
        }
        const std::uint64_t current = arm_locked();
        auto self = shared_from_this();
        if (auto* pause = std::get_if<record_wait::pause_request>(&next)) {
          timer = d.loop.at(pause->until, [self, current](event_loop::wake why) { self->paused(current, why); });
          if (timer == 0) return stopped(lock);
          lock.unlock();
          return;
        }
        const steady::time_point until = std::get<record_wait::wait_request>(next).until;
        if (!wait->watch().notify_on_change(wait->seen(), [self, current] { self->woken(current, event_loop::wake::ready); })) {
          next = wait->woken();  // it changed already
          continue;
        }
        timer = d.loop.at(until, [self, current](event_loop::wake why) { self->woken(current, why); });
        if (timer == 0) return stopped(lock);
        lock.unlock();
        return;
      }
    });
    if (failed) finish(lock, std::move(failed), acquire_result{in_flight{}});
  }

  void paused(std::uint64_t which, event_loop::wake why) {
    std::unique_lock lock(mutex);
    if (finished || which != generation) return;
    timer = 0;
    if (why == event_loop::wake::stopped) return stopped(lock);
    record_wait::step next;
    if (std::exception_ptr failed = detail::caught([&] { next = wait->paused(); }))
      return finish(lock, std::move(failed), acquire_result{in_flight{}});
    advance(lock, std::move(next));
  }

  // A message (or a change of the subscription) or the wait's time: whichever comes first.
  void woken(std::uint64_t which, event_loop::wake why) {
    std::unique_lock lock(mutex);
    if (!take_wake_locked(which)) return;
    if (why == event_loop::wake::stopped) return stopped(lock);
    record_wait::step next;
    if (std::exception_ptr failed = detail::caught([&] { next = wait->woken(); }))
      return finish(lock, std::move(failed), acquire_result{in_flight{}});
    advance(lock, std::move(next));
  }

  void stopped(std::unique_lock<std::mutex>& lock) {
    finish(lock, std::make_exception_ptr(detail::destroyed_while_waiting("redis_store", ctx.id)), acquire_result{in_flight{}});
  }

  void stop_waiting_locked() {
    if (timer != 0) {
      d.loop.cancel(timer);
      timer = 0;
    }
    if (wait) wait->watch().cancel_notify();
  }

  void let_go_locked() { wait.reset(); }  // unwatches the channel

  // A look that answered after the call had ended (cancelled): a record it claimed is given back,
  // since nobody will run the action for it.
  void give_back(const std::exception_ptr& error, outcome& out) {
    if (error || out.reply == nullptr) return;
    try {
      impl::look late = d.read_look(ctx, request, out, sent_at);
      if (std::holds_alternative<acquired>(late.answer)) {
        d.async_release_record(ctx.id, request.key, text_of(request.token_hex), [](std::exception_ptr) {});
      }
    } catch (...) {
      // It stays in progress until its lease expires.
    }
  }
};

// One asynchronous complete or release: its request, its script call and its answer.
template <class Request>
struct redis_store::impl::async_mutation {
  template <class... Args>
  explicit async_mutation(async_done handler, Args&&... args)
      : request(std::forward<Args>(args)...), done(std::move(handler)) {}
  Request request;
  std::optional<script_call> call;
  async_done done;
  std::chrono::steady_clock::time_point sent_at;
  std::shared_ptr<async_mutation> kept_until_answered;  // itself until the script answers (as async_acquire's)
};

void redis_store::impl::async_release_record(const identity& id, const std::string& key, std::string_view token_text,
                                             async_done done) {
  struct release_call {
    release_call(const impl& store, const identity& i, const std::string& key, std::string_view token)
        : id(i), request(store, id, key, std::string(token)) {}
    const identity id;
    const release_request request;
  };
  auto op = std::allocate_shared<async_mutation<release_call>>(detail::recycling_allocator<async_mutation<release_call>>(),
                                                               std::move(done), *this, id, key, token_text);
  op->call.emplace(*this, target{"release", &op->request.id}, rd::scripts().release, op->request.request.keys,
                   op->request.request.args, true);
  op->kept_until_answered = op;
  run_async(*op->call, [this, sent = op.get()](std::exception_ptr error, outcome out) {
    const auto self = std::move(sent->kept_until_answered);
    if (!error) error = detail::caught([&] { read_release(self->call->t, out); });
    self->done(std::move(error));
  });
}

std::optional<acquire_result> redis_store::try_acquire_at_once(const context& ctx) {
  impl& d = *impl_;
  if (!d.cache) return std::nullopt;
  return d.cached(ctx, d.key_of(ctx.id), steady::now());
}

void redis_store::async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) {
  impl& d = *impl_;
  // A claim must wait for its replicas, which the script cannot carry: the blocking path.
  if (d.options.replica_ack.replicas > 0) return store::async_try_acquire(ctx, cancel, std::move(done));
  std::string key = d.key_of(ctx.id);
  std::optional<acquire_result> hit;
  if (std::exception_ptr failed = detail::caught([&] {
        if (d.cache) hit = d.cached(ctx, key, steady::now());  // without a cache, no clock read
      })) {
    done(std::move(failed), acquire_result{in_flight{}});
    return;
  }
  if (hit) {
    done(nullptr, std::move(*hit));
    return;
  }
  std::allocate_shared<impl::async_acquire>(detail::recycling_allocator<impl::async_acquire>(), d, ctx, std::move(key),
                                           cancel, std::move(done))
      ->start();
}

void redis_store::async_complete(const identity& id, const lease_token& token, const payload& value,
                                 std::chrono::milliseconds ttl, async_done done) {
  impl& d = *impl_;
  struct complete_call {
    complete_call(const impl& store, const identity& i, const lease_token& token, const payload& v, milliseconds t)
        : id(i),
          value(store.cache ? std::optional<payload>(v) : std::nullopt),
          ttl(t),
          request(store, id, token, v, ttl) {}
    const identity id;
    const std::optional<payload> value;  // for the local cache only: a copy nobody reads costs two allocations
    const milliseconds ttl;
    const impl::complete_request request;
  };
  using complete_op = impl::async_mutation<complete_call>;
  auto op = std::allocate_shared<complete_op>(detail::recycling_allocator<complete_op>(), std::move(done), d, id, token,
                                             value, ttl);
  op->call.emplace(d, impl::target{"complete", &op->request.id}, rd::scripts().complete, op->request.request.keys,
                   op->request.request.args, true);
  if (d.cache) op->sent_at = steady::now();  // read only to date what the local cache keeps
  op->kept_until_answered = op;
  d.run_async(*op->call, [&d, sent = op.get()](std::exception_ptr error, impl::outcome out) {
    const auto self = std::move(sent->kept_until_answered);
    if (!error)
      error = detail::caught([&] {
        d.read_complete(self->call->t, self->request.request, self->request.value ? &*self->request.value : nullptr,
                        self->request.ttl, out, self->sent_at);
      });
    self->done(std::move(error));
  });
}

void redis_store::async_release(const identity& id, const lease_token& token, async_done done) {
  impl& d = *impl_;
  d.async_release_record(id, d.key_of(id), token.to_string(), std::move(done));
}

}  // namespace idem
