// tests/async/burst.hpp — what the "1,000 coroutines on one thread" cases share: a burst of
// duplicate calls on one io_context thread, and the process's thread count.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/asio.hpp>
#include <idem/idem.hpp>

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

}  // namespace idem::test
