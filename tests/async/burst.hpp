// tests/async/burst.hpp — what the asynchronous cases of every store share: a burst of duplicate
// calls on one io_context thread and what it must show, the process's thread count, and a store
// destroyed with a duplicate waiting.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <variant>

#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
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
