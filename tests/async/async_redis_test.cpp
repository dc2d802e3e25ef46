// tests/async/async_redis_test.cpp — idem::async_execute on the Redis store (a single server, or
// the fixture's Redis Cluster when $IDEM_REDIS_CLUSTER_DIR is set): replies and a duplicate's wait
// complete on the store's own threads, never on a thread parked for the call.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/asio.hpp>
#include <idem/idem.hpp>
#include <idem/redis_store.hpp>

#include "burst.hpp"
#include "redis_support.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using idem::test::burst;
using idem::test::burst_result;

// A store on the fixture's server under a prefix of its own; with `io`, it reads its replies on
// that io_context (options.event_loop) instead of a reactor thread of its own.
std::unique_ptr<idem::redis_store> store_for(const char* hint, asio::io_context* io = nullptr) {
  idem::redis_store_options options =
      idem::redis_test::test_options(idem::redis_test::fixture_address(), idem::redis_test::unique_prefix(hint));
  if (io != nullptr) options.event_loop = std::make_shared<idem::asio::event_loop>(*io);
  return std::make_unique<idem::redis_store>(options);
}

}  // namespace

namespace {

// 1,000 coroutines on one io_context thread: 500 keys, each called twice at once, the action a
// 50 ms timer. `on_loop`: the store reads its replies on that io_context (options.event_loop).
void burst_on_redis(bool on_loop) {
  asio::io_context io;
  auto store = store_for("burst", on_loop ? &io : nullptr);
  idem::engine engine{*store, idem::test::quiet_config()};
  // First every node's threads (the subscriber's, started on a node's first wait) and connections
  // (opened on the shared blocking pool): a fixed set, whatever the number of calls. On a cluster,
  // 5 keys may not reach every master.
  const burst_result warm = burst(io, engine, 50, "Burst.warm");
  REQUIRE(warm.executions == 50);
  const burst_result few = burst(io, engine, 5, "Burst.few");
  const burst_result many = burst(io, engine, 500, "Burst.many");
  idem::test::check_burst(few, many, *store, on_loop ? "on Redis (replies read on the io_context)" : "on Redis");
}

}  // namespace

TEST_CASE("1,000 coroutines on one thread on Redis: 500 keys twice at once, each action 50 ms, nothing parked") {
  burst_on_redis(false);
}

TEST_CASE("1,000 coroutines on Redis with the store's replies read on their io_context thread (event_loop)") {
  burst_on_redis(true);
}

TEST_CASE("on Redis, a duplicate cancelled while it waits ends with operation_aborted and changes nothing") {
  auto store = store_for("cancel");
  idem::engine engine{*store, idem::test::quiet_config()};
  asio::io_context io;
  idem::test::check_cancelled_duplicate(io, engine, *store, "Cancel.redis", "k");
}

TEST_CASE("a Redis store destroyed with a duplicate waiting answers it store_unavailable_error") {
  idem::test::check_destroyed_with_a_waiter(store_for("destroyed"), "Destroyed.redis");
}

TEST_CASE("a Redis store on the caller's event loop, destroyed with a duplicate waiting, answers it store_unavailable_error") {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  idem::test::check_destroyed_with_a_waiter(store_for("loop-gone", &io), "Destroyed.loop");
  work.reset();
  runner.join();
}

TEST_CASE("a Redis store may be let go of in the completion of its last call, on either event loop") {
  idem::test::check_let_go(
      [](asio::io_context* io) { return store_for("let-go", io); },
      "LetGo.redis", "k");
}

namespace {

// What the handlers of one round of calls record; shared with them, so that a round given up on
// (a failed REQUIRE) leaves nothing dangling for the handlers the store's destruction runs.
struct round_record {
  std::atomic<int> released{0};  // handlers let go of
  std::mutex mutex;  // the first round's answers may come from the store's threads (the slot map unknown)
  std::vector<int> seen;
};

// Counts the completion handlers let go of: one per asynchronous call.
struct held_handler {
  explicit held_handler(std::shared_ptr<round_record> r) : record(std::move(r)) {}
  held_handler(const held_handler&) = delete;
  held_handler& operator=(const held_handler&) = delete;
  ~held_handler() { ++record->released; }
  std::shared_ptr<round_record> record;
};

// `calls` claims of fresh keys at once, made before `io` (the store's event loop) runs: the caller
// holds each call while it starts it, and a reply answered meanwhile on another thread would be let
// go of by the caller, later. Then `io` runs on this thread until every call is answered and let
// go of. For each answer, in order, how many handlers had been let go of when it came (-1 for an
// answer that was not a claim).
std::vector<int> released_at_each_answer(asio::io_context& io, idem::redis_store& store, idem::engine& engine,
                                         const std::string& scope, int calls) {
  auto record = std::make_shared<round_record>();
  for (int i = 0; i < calls; ++i) {
    store.async_try_acquire(engine.make_context(scope, "k" + std::to_string(i)), nullptr,
                            [mine = std::make_shared<held_handler>(record)](std::exception_ptr error,
                                                                           idem::acquire_result result) {
                              const bool claimed = error == nullptr && std::holds_alternative<idem::acquired>(result);
                              round_record& r = *mine->record;
                              std::lock_guard lock(r.mutex);
                              r.seen.push_back(claimed ? r.released.load() : -1);
                            });
  }
  // Kept running while no registration is pending yet (a connection being opened elsewhere).
  io.restart();
  auto work = asio::make_work_guard(io);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (record->released.load() < calls && std::chrono::steady_clock::now() < deadline) io.run_one_for(100ms);
  REQUIRE(record->released.load() == calls);
  std::lock_guard lock(record->mutex);
  return record->seen;
}

}  // namespace

// The replies read together are answered one after the other; each call, with everything its
// handler holds (its caller's whole call), goes as soon as its handler returns — not with the last
// of the batch, which would free dozens of calls at once just after their successors were made.
TEST_CASE("on Redis, each asynchronous call is let go of as soon as its handler returns, not with its batch") {
  asio::io_context io;
  auto store = store_for("let-go-each", &io);
  idem::engine engine{*store, idem::test::quiet_config()};
  constexpr int calls = 32;
  released_at_each_answer(io, *store, engine, "Each.warm", calls);  // connections and the slot map first
  const std::vector<int> seen = released_at_each_answer(io, *store, engine, "Each.call", calls);
  REQUIRE(seen.size() == static_cast<std::size_t>(calls));
  // Every reply is answered on this thread, in io.run_one_for: the k-th answer (from 0) finds the
  // k handlers answered before it let go of.
  for (int k = 0; k < calls; ++k) CHECK(seen[static_cast<std::size_t>(k)] == k);
}
