// runtime/postgres/async_calls.cpp — postgres_store's asynchronous calls: statements driven on the
// event loop (libpq's non-blocking API, the socket watched by the loop), a duplicate's wait a
// registration on the listener plus a timer. The rules are the blocking calls' own machines
// (claim_attempts, fenced_call); what is here only waits differently.
#include <fmt/format.h>

#include <idem/async.hpp>
#include <idem/deadline.hpp>
#include <idem/errors.hpp>
#include <system_error>
#include <variant>

#include "../core/caught.hpp"
#include "../core/pending_calls.hpp"
#include "../core/waiting_call.hpp"
#include "store_impl.hpp"

namespace idem {

using namespace detail::pg;

namespace {

// One statement on one checkout, driven on the loop: the prepare first where this connection has
// not prepared it yet, then the statement.
struct statement_call : std::enable_shared_from_this<statement_call> {
  statement_call(postgres_store::impl& store, std::shared_ptr<connection_pool::checkout> checkout, statement_id which,
                 param_list p, steady::time_point until, result_handler handler)
      : s(store), c(std::move(checkout)), id(which), params(std::move(p)), deadline(until), done(std::move(handler)) {}

  postgres_store::impl& s;
  std::shared_ptr<connection_pool::checkout> c;
  const statement_id id;
  const param_list params;
  const steady::time_point deadline;
  result_handler done;
  std::optional<exchange> x;
  bool preparing = false;

  std::uint32_t bit() const { return 1u << static_cast<unsigned>(id); }

  void start() {
    try {
      c->connection().watched_by = &s.loop;
      const statement& st = statement_for(id);
      preparing = (c->connection().prepared & bit()) == 0;
      s.round_trips.fetch_add(1, std::memory_order_relaxed);
      x.emplace(preparing ? exchange::prepare(c->get(), st.name, st.sql, st.param_count, st.types.data())
                          : exchange::query_prepared(c->get(), st.name, params));
    } catch (pg_error& e) {
      return fail(e);
    }
    advance();
  }

  void advance() {
    try {
      for (;;) {
        const exchange::need next = x->advance();
        if (next != exchange::need::nothing) return wait(next);
        result_ptr r = x->take();
        if (!preparing) {
          s.answered();
          return finish(std::move(r), nullptr);
        }
        c->connection().prepared |= bit();
        preparing = false;
        s.round_trips.fetch_add(1, std::memory_order_relaxed);
        x.emplace(exchange::query_prepared(c->get(), statement_for(id).name, params));
      }
    } catch (pg_error& e) {
      fail(e);
    }
  }

  void wait(exchange::need next) {
    const auto what =
        next == exchange::need::writable ? event_loop::readiness::writable : event_loop::readiness::readable;
    event_loop::id registered = 0;
    try {
      registered = s.loop.when_ready(PQsocket(c->get()), what, deadline, [self = shared_from_this(), next](event_loop::wake why) {
        self->woken(why, next);
      });
    } catch (const std::system_error& e) {
      pg_error lost(failure::connection_lost, fmt::format("cannot watch the connection: {}", e.what()));
      return fail(lost);
    }
    if (registered == 0) stopped();
  }

  void woken(event_loop::wake why, exchange::need waited) {
    if (why == event_loop::wake::ready) return advance();
    if (why == event_loop::wake::stopped) return stopped();
    pg_error late = timeout_error(waited == exchange::need::writable ? "sending" : "waiting for the result");
    fail(late);
  }

  void stopped() {
    // Sent, perhaps, and never to be read: the connection cannot be used again.
    pg_error gone(failure::connection_lost, "the store is shutting down");
    fail(gone);
  }

  void fail(pg_error& e) {
    s.failed(*c, e);
    finish(nullptr, std::make_exception_ptr(e));
  }

  void finish(result_ptr r, std::exception_ptr error) {
    c.reset();  // back to the pool (closed if it broke) before anything else is sent
    result_handler report = std::move(done);
    report(std::move(r), std::move(error));
  }
};

// Rethrows a statement's error inside a try block of the caller's: the pg_error to hand to a
// machine.
template <class OnPgError>
auto on_pg_error(const std::exception_ptr& error, OnPgError&& handle) {
  try {
    std::rethrow_exception(error);
  } catch (const pg_error& e) {
    return handle(e);
  }
}

// One asynchronous complete or release.
struct async_fenced : std::enable_shared_from_this<async_fenced> {
  async_fenced(postgres_store::impl& store, fenced_call c, async_done handler)
      : s(store), call(std::move(c)), done(std::move(handler)) {}

  postgres_store::impl& s;
  fenced_call call;
  async_done done;

  void start() {
    s.pool.async_acquire(call.deadline(), s.loop,
                         [self = shared_from_this()](std::exception_ptr error, std::shared_ptr<connection_pool::checkout> c) {
                           self->connected(std::move(error), std::move(c));
                         });
  }

  void connected(std::exception_ptr error, std::shared_ptr<connection_pool::checkout> c) {
    if (error) {
      // no_connection rethrows what the call cannot survive; anything but a pg_error passes on.
      if (std::exception_ptr failed = detail::caught([&] {
            try {
              std::rethrow_exception(error);
            } catch (const pg_error& e) {
              call.no_connection(e);
            }
          }))
        return report(std::move(failed));
    }
    const int backend = PQbackendPID(c->get());
    s.async_run(std::move(c), call.statement(), call.params(), call.deadline(),
                [self = shared_from_this(), backend](result_ptr r, std::exception_ptr failure) {
                  self->answered(std::move(r), std::move(failure), backend);
                });
  }

  void answered(result_ptr r, std::exception_ptr error, int backend) {
    bool again = false;
    std::exception_ptr failed = detail::caught([&] {
      if (error && on_pg_error(error, [&](const pg_error& e) { return call.failed(e, backend); })) {
        again = true;
        return;
      }
      call.answered(r.get());
    });
    if (again && !failed) return start();
    report(std::move(failed));
  }

  void report(std::exception_ptr error) {
    async_done handler = std::move(done);
    handler(std::move(error));
  }
};

}  // namespace

void postgres_store::impl::async_run(std::shared_ptr<connection_pool::checkout> c, statement_id id, param_list p,
                                     steady::time_point deadline, result_handler done) {
  std::make_shared<statement_call>(*this, std::move(c), id, std::move(p), deadline, std::move(done))->start();
}

// One asynchronous try_acquire: claims (claim_attempts) sent on the event loop, waits as a
// registration on the record's notifications plus a timer. Every step but the statement itself
// runs under the lock (detail::waiting_call: cancellation, the store's destruction, stale wake-ups).
struct postgres_store::impl::async_claim : detail::waiting_call<async_claim> {
  async_claim(postgres_store::impl& store, const context& c, cancellation* cancel_request,
              async_handler<acquire_result> handler)
      : waiting_call(c, cancel_request, std::move(handler), &store.pending), s(store), deadline(deadline_after(ctx.wait)) {}

  postgres_store::impl& s;
  const steady::time_point deadline;

  bool claiming = false;  // a claim is out: its answer decides, or is given back when finished
  std::optional<claim_attempts> attempts;
  event_loop::id timer = 0;

  void start() {
    if (!begin("postgres_store")) return;
    std::unique_lock lock(mutex);
    attempts.emplace(s, ctx, deadline);
    send(lock);
  }

  store_unavailable_error going_error() const { return detail::destroyed_while_waiting("postgres_store", ctx.id); }

  // Sends the next claim. Called with the lock held; returns without it.
  void send(std::unique_lock<std::mutex>& lock) {
    claiming = true;
    const steady::time_point bound = attempts->bound();
    param_list request = attempts->request();
    lock.unlock();
    s.pool.async_acquire(bound, s.loop,
                         [self = shared_from_this(), bound, request = std::move(request)](
                             std::exception_ptr error, std::shared_ptr<connection_pool::checkout> c) mutable {
                           if (error) return self->claimed(nullptr, std::move(error), 0);
                           const int backend = PQbackendPID(c->get());
                           self->s.async_run(std::move(c), statement_id::claim, std::move(request), bound,
                                             [self, backend](result_ptr r, std::exception_ptr failure) {
                                               self->claimed(std::move(r), std::move(failure), backend);
                                             });
                         });
  }

  // A claim answered `r` or failed with `error` (a pg_error) after it was sent to `backend`.
  void claimed(result_ptr r, std::exception_ptr error, int backend) {
    std::unique_lock lock(mutex);
    claiming = false;
    if (finished) {  // cancelled, or the store is going: a record claimed meanwhile is given back
      std::optional<acquire_result> late;
      try {
        if (!error) late = std::get<acquire_result>(attempts->answered(r.get()));
      } catch (...) {
        // Not an answer to act on.
      }
      if (!late || !std::holds_alternative<acquired>(*late)) attempts->abandon();
      attempts.reset();
      lock.unlock();
      if (late && std::holds_alternative<acquired>(*late)) give_back(std::get<acquired>(*late).token);
      return;
    }
    claim_attempts::step next = claim_attempts::look_again{};
    if (std::exception_ptr failed = detail::caught([&] {
          if (error) {
            next = on_pg_error(error, [&](const pg_error& e) { return attempts->failed(e, backend); });
          } else {
            next = attempts->answered(r.get());
          }
        }))
      return finish(lock, std::move(failed), acquire_result{in_flight{}});
    if (auto* answer = std::get_if<acquire_result>(&next)) return finish(lock, nullptr, std::move(*answer));
    if (std::holds_alternative<claim_attempts::look_again>(next)) return send(lock);
    wait(lock, std::get<claim_attempts::wait_for>(next).until);
  }

  // Waits for the record's notification or `until`. Called with the lock held; returns without it.
  void wait(std::unique_lock<std::mutex>& lock, steady::time_point until) {
    const std::uint64_t current = arm_locked();
    auto self = shared_from_this();
    if (!attempts->subscription().notify_on_change([self, current] { self->woken(current); })) {
      return send(lock);  // it changed already
    }
    event_loop::id registered = 0;
    if (std::exception_ptr failed = detail::caught([&] {
          registered = s.loop.at(until, [self, current](event_loop::wake why) {
            if (why == event_loop::wake::stopped)
              return self->end_early(std::make_exception_ptr(self->going_error()));
            self->woken(current);
          });
        }))
      return finish(lock, std::move(failed), acquire_result{in_flight{}});
    if (registered == 0) return finish(lock, std::make_exception_ptr(going_error()), acquire_result{in_flight{}});
    timer = registered;
    lock.unlock();
  }

  // The record was notified, or the wait's time came: look again.
  void woken(std::uint64_t which) {
    std::unique_lock lock(mutex);
    if (take_wake_locked(which)) send(lock);
  }

  void abandon_locked() {
    if (attempts && !claiming) attempts->abandon();
  }

  void stop_waiting_locked() {
    if (timer != 0) s.loop.cancel(timer);
    timer = 0;
    if (attempts) attempts->cancel_notify();
  }

  void let_go_locked() {
    if (!claiming) attempts.reset();  // else the claim out now lets go of it
  }

  // A record acquired after the caller stopped waiting is released (a store that is going
  // leaves it to its lease).
  void give_back(const lease_token& token) {
    if (store_stopping()) return;
    const digest d = ctx.id.key_digest();
    std::make_shared<async_fenced>(
        s, fenced_call(s, statement_id::release, "release", ctx.id, release_params(ctx.id, d, token), std::pair{d, token}),
        [](std::exception_ptr) {})
        ->start();
  }
};

void postgres_store::impl::stop_async() {
  for (const auto& op : pending.take_all()) op->end_early(std::make_exception_ptr(op->going_error()));
  pool.stop_async(std::make_exception_ptr(pg_error(failure::connect_failed, "the store is shutting down")));
  loop.stop();  // answers what is still registered (statements in flight fail, their callers hear it)
}

void postgres_store::async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) {
  std::make_shared<impl::async_claim>(*impl_, ctx, cancel, std::move(done))->start();
}

void postgres_store::async_complete(const identity& id, const lease_token& token, const payload& value,
                                    milliseconds ttl, async_done done) {
  const digest d = id.key_digest();
  std::make_shared<async_fenced>(
      *impl_, fenced_call(*impl_, statement_id::complete, "complete", id, complete_params(id, d, token, value, ttl)),
      std::move(done))
      ->start();
}

void postgres_store::async_release(const identity& id, const lease_token& token, async_done done) {
  const digest d = id.key_digest();
  std::make_shared<async_fenced>(
      *impl_, fenced_call(*impl_, statement_id::release, "release", id, release_params(id, d, token), std::pair{d, token}),
      std::move(done))
      ->start();
}

}  // namespace idem
