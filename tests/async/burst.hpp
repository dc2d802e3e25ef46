// tests/async/burst.hpp — what the asynchronous cases of every store share: a burst of duplicate
// calls on one io_context thread and what it must show, the process's thread count, a duplicate
// cancelled while it waits, and a store destroyed with a duplicate waiting.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <variant>

#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/asio.hpp>
#include <idem/idem.hpp>

#include "support/eventually.hpp"

namespace idem::test {

namespace burst_detail {
namespace asio = boost::asio;
using namespace std::chrono_literals;
}  // namespace burst_detail

// The threads of this process now.
inline std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// No scheduled purge: its thread would count in thread_count().
inline idem::config quiet_config() {
  idem::config c;
  c.purge_interval = std::chrono::milliseconds::zero();
  return c;
}

// What the burst below saw: executions, answers, the most actions running at one time and the
// process's threads at that moment.
struct burst_result {
  int executions = 0;
  int executed = 0;
  int replayed = 0;
  int other = 0;
  int peak_running = 0;
  std::size_t peak_threads = 0;
  std::chrono::milliseconds took{};
};

// `keys` keys, each called twice at once, every call a coroutine on one io_context thread; the
// action waits 50 ms on a steady_timer. The actions first wait, at most 30 s, until all of them
// have started: none waits for another unless the calls block the thread, and a slow machine
// cannot end one action before the last has started.
// The calls run on `io` (restarted first), on the thread calling burst().
inline burst_result burst(boost::asio::io_context& io, idem::engine& engine, int keys, const std::string& scope) {
  using namespace burst_detail;
  io.restart();
  burst_result r;
  int running = 0;
  asio::steady_timer all_started(io, 30s);
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < keys; ++k) {
    for (int copy = 0; copy < 2; ++copy) {
      asio::co_spawn(
          io,
          [&, k]() -> asio::awaitable<void> {
            auto ctx = engine.make_context(scope, "key-" + std::to_string(k), {.wait = 10s});
            auto o = co_await idem::async_execute(
                engine, ctx,
                [&, k]() -> asio::awaitable<int> {
                  ++r.executions;
                  r.peak_running = std::max(r.peak_running, ++running);
                  if (running == keys) {
                    r.peak_threads = thread_count();
                    all_started.cancel();
                  } else {
                    co_await all_started.async_wait(asio::as_tuple(asio::use_awaitable));
                  }
                  asio::steady_timer timer(co_await asio::this_coro::executor, 50ms);
                  co_await timer.async_wait(asio::use_awaitable);
                  --running;
                  co_return k;
                },
                idem::json_codec{}, asio::use_awaitable);
            if (o.ran() && o.value() == k) {
              ++r.executed;
            } else if (o.is_replay() && o.value() == k) {
              ++r.replayed;
            } else {
              ++r.other;
            }
          },
          asio::detached);
    }
  }
  io.run();
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return r;
}

// The same on an io_context of its own.
inline burst_result burst(idem::engine& engine, int keys, const std::string& scope) {
  boost::asio::io_context io;
  return burst(io, engine, keys, scope);
}

// What 500 keys called twice at once (`many`) must show beside 5 (`few`): each key executed once,
// every duplicate answered with the replay, all actions running at once on the one thread (none
// waited for another), the same threads for 10 calls as for 1,000, and no waiter left.
inline void check_burst(const burst_result& few, const burst_result& many, const idem::store& store,
                        const std::string& where) {
  CHECK(many.executions == 500);
  CHECK(many.executed == 500);
  CHECK(many.replayed == 500);
  CHECK(many.other == 0);
  CHECK(many.peak_running == 500);
  CHECK(few.peak_running == 5);
  CHECK(many.peak_threads == few.peak_threads);
  CHECK(store.waiting() == 0);
  WARN("1,000 calls " << where << " on one io_context thread took " << many.took.count()
                      << " ms (a blocking loop: 25 s); " << many.peak_threads << " threads with 1,000 calls, "
                      << few.peak_threads << " with 10");
}

// A duplicate of a call whose awaitable action is still running is cancelled (Asio per-operation
// cancellation) once `store` counts it among its waiters: it must end with operation_aborted, its
// action never run, and the holder's completion must stand (replayed afterwards). Runs `io`.
inline void check_cancelled_duplicate(boost::asio::io_context& io, idem::engine& engine, const idem::store& store,
                                      const std::string& scope, const std::string& key) {
  using namespace burst_detail;
  asio::cancellation_signal cancel;
  asio::steady_timer holder_done(io, 30s);
  bool aborted = false;
  bool holder_ran = false;
  int duplicate_runs = 0;
  auto ctx = engine.make_context(scope, key, {.wait = 20s});
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto o = co_await idem::async_execute(
            engine, ctx,
            [&]() -> asio::awaitable<int> {
              holder_ran = true;
              co_await holder_done.async_wait(asio::as_tuple(asio::use_awaitable));
              co_return 7;
            },
            idem::json_codec{}, asio::use_awaitable);
        CHECK(o.ran());
      },
      asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // Started once the holder runs: the duplicate then finds the record held and waits.
        while (!holder_ran) co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        idem::async_execute(
            engine, ctx, [&] { return ++duplicate_runs; }, idem::json_codec{},
            asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, idem::outcome<int>) {
              try {
                if (e) std::rethrow_exception(e);
              } catch (const boost::system::system_error& error) {
                aborted = error.code() == asio::error::operation_aborted;
              }
              holder_done.cancel();  // let the holder finish once the duplicate is answered
            }));
        co_return;
      },
      asio::detached);
  std::thread canceller([&] {
    // Cancels once the duplicate is counted among the store's waiters (an event, not a sleep).
    REQUIRE(idem::test::eventually([&] { return store.waiting() == 1; }, 20s));
    asio::post(io, [&] { cancel.emit(asio::cancellation_type::all); });
  });
  io.run();
  canceller.join();
  CHECK(aborted);
  CHECK(duplicate_runs == 0);
  CHECK(store.waiting() == 0);
  auto replay = engine.execute(ctx, [] { return 0; }, idem::json_codec{});
  CHECK(replay.is_replay());
  CHECK(replay.value() == 7);
}

// A store let go of inside the completion of its last call (on the store's own thread, or on the
// io_context when `make_store` hands it one as its event loop) must finish cleanly. `make_store(io)`
// makes the store; `io` is null for the store's own loop.
inline void check_let_go(const std::function<std::unique_ptr<idem::store>(boost::asio::io_context*)>& make_store,
                         const std::string& scope, const std::string& key) {
  using namespace burst_detail;
  for (bool on_loop : {false, true}) {
    asio::io_context io;
    int replays = 0;
    // The coroutine owns the store: it is destroyed when the coroutine ends, inside the completion
    // of its last call (on the store's own thread or on `io`).
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          std::unique_ptr<idem::store> store = make_store(on_loop ? &io : nullptr);
          idem::engine engine{*store, idem::test::quiet_config()};
          auto ctx = engine.make_context(scope, key + (on_loop ? ".loop" : ".own"));
          for (int i = 0; i < 2; ++i) {
            auto o = co_await idem::async_execute(engine, ctx, [] { return 5; }, idem::json_codec{}, asio::use_awaitable);
            if (o.is_replay() && o.value() == 5) ++replays;
          }
        },
        asio::detached);
    io.run();
    CHECK(replays == 1);
  }
}

// A duplicate waits on `store` (its holder never finishes); then the store is destroyed: the wait
// must be answered store_unavailable_error.
inline void check_destroyed_with_a_waiter(std::unique_ptr<idem::store> store, const std::string& scope) {
  using namespace std::chrono_literals;
  idem::context ctx{.id = idem::identity(scope, "k"), .ttl = 1h, .lease = 30s, .wait = 20s};
  ctx.validate();
  auto held = store->try_acquire(ctx);
  REQUIRE(std::holds_alternative<idem::acquired>(held));
  std::promise<std::exception_ptr> answered;
  store->async_try_acquire(ctx, nullptr, [&](std::exception_ptr e, idem::acquire_result) { answered.set_value(e); });
  REQUIRE(idem::test::eventually([&] { return store->waiting() == 1; }, 20s));
  store.reset();
  auto answer = answered.get_future();
  REQUIRE(answer.wait_for(20s) == std::future_status::ready);
  CHECK_THROWS_AS(std::rethrow_exception(answer.get()), idem::store_unavailable_error);
}

}  // namespace idem::test
