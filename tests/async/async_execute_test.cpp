// tests/async/async_execute_test.cpp — idem::async_execute on Boost.Asio over the memory store:
// no thread parked per call, engine::execute's semantics, completion tokens, cancellation, and
// engines and stores destroyed with calls pending.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <idem/asio.hpp>
#include <idem/idem.hpp>

#include "burst.hpp"
#include "support/faulty_store.hpp"
#include "support/test_transaction.hpp"
#include "support/eventually.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using idem::test::eventually;
using idem::test::burst;
using idem::test::burst_result;
using idem::test::quiet_config;
using idem::test::thread_count;

// Counts every lifecycle event, to check that each call reports exactly one terminal.
struct counting_listener final : idem::lifecycle_listener {
  std::atomic<int> acquired{0}, completed{0}, failed{0}, duplicates{0}, in_flight{0};
  void on_acquired(const idem::context&, const idem::lease_token&) override { ++acquired; }
  void on_completed(const idem::context&, const idem::lease_token&, const idem::payload&) override { ++completed; }
  void on_failed(const idem::context&, const idem::lease_token&, std::exception_ptr, idem::failure_phase) override {
    ++failed;
  }
  void on_duplicate(const idem::context&, const idem::payload&, std::chrono::system_clock::time_point) override {
    ++duplicates;
  }
  void on_in_flight(const idem::context&, std::chrono::milliseconds) override { ++in_flight; }
};

// A completion handler that sets `aborted` when the call ended with operation_aborted.
auto sets_if_aborted(bool& aborted) {
  return [&aborted](std::exception_ptr e, idem::outcome<void>) {
    try {
      if (e) std::rethrow_exception(e);
    } catch (const boost::system::system_error& error) {
      aborted = error.code() == asio::error::operation_aborted;
    }
  };
}

}  // namespace

TEST_CASE("1,000 coroutines on one thread: 500 keys twice at once, each action 50 ms, nothing parked") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  const burst_result few = burst(engine, 5, "Burst.few");
  const burst_result many = burst(engine, 500, "Burst.many");
  idem::test::check_burst(few, many, store, "on the memory store");
}

TEST_CASE("async_execute keeps execute's semantics: replay decoded, in flight, throw releases, listeners once") {
  idem::memory_store store;
  auto listener = std::make_shared<counting_listener>();
  idem::engine engine{store, quiet_config(), {.listeners = {listener}}};
  asio::io_context io;
  const auto io_thread_checked = std::make_shared<bool>(false);

  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const auto io_thread = std::this_thread::get_id();
        // A plain action runs inline on the caller's executor.
        auto ctx = engine.make_context("Semantics.plain", "k1");
        auto first = co_await idem::async_execute(
            engine, ctx,
            [&] {
              *io_thread_checked = std::this_thread::get_id() == io_thread;
              return std::string("receipt-1");
            },
            idem::json_codec{}, asio::use_awaitable);
        CHECK(first.ran());
        auto again = co_await idem::async_execute(
            engine, ctx, [] { return std::string("never"); }, idem::json_codec{}, asio::use_awaitable);
        CHECK(again.is_replay());
        CHECK(again.value() == "receipt-1");

        // A throw releases the record and propagates unchanged; the next call runs.
        auto failing = engine.make_context("Semantics.throws", "k2");
        bool threw = false;
        try {
          (void)co_await idem::async_execute(
              engine, failing, []() -> asio::awaitable<void> {
                throw std::runtime_error("boom");
                co_return;
              },
              asio::use_awaitable);
        } catch (const std::runtime_error& e) {
          threw = std::string(e.what()) == "boom";
        }
        CHECK(threw);
        auto retried = co_await idem::async_execute(engine, failing, [] {}, asio::use_awaitable);
        CHECK(retried.ran());

        // A held record with wait 0 answers in flight with the holder's remaining lease.
        auto held = store.try_acquire(engine.make_context("Semantics.held", "k3", {.lease = 20s}));
        REQUIRE(std::holds_alternative<idem::acquired>(held));
        auto busy = co_await idem::async_execute(engine, engine.make_context("Semantics.held", "k3", {.wait = 0s}),
                                                 [] {}, asio::use_awaitable);
        CHECK(busy.is_in_flight());
        CHECK(busy.retry_after() > 10s);
        CHECK(busy.retry_after() <= 20s);
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  CHECK(*io_thread_checked);
  CHECK(listener->acquired == 3);
  CHECK(listener->completed == 2);
  CHECK(listener->failed == 1);
  CHECK(listener->duplicates == 1);
  CHECK(listener->in_flight == 1);
}

TEST_CASE("a call completes on a strand of any_io_executor: the handler's, or a coroutine's own executor type") {
  // A strand of any_io_executor (what make_strand gives for a socket's executor) has no
  // on_work_started, so the call's work tracking must not rely on it; io.run() returning with both
  // calls answered shows the work was counted and then released.
  using strand = asio::strand<asio::any_io_executor>;
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  const strand serial(io.get_executor());
  int answered = 0;
  idem::async_execute(engine, engine.make_context("Strands.callback", "k"), [] { return 5; }, idem::json_codec{},
                      asio::bind_executor(serial, [&](std::exception_ptr e, idem::outcome<int> o) {
                        if (!e && o.value() == 5 && serial.running_in_this_thread()) ++answered;
                      }));
  asio::co_spawn(
      serial,
      [&]() -> asio::awaitable<void, strand> {
        const auto ctx = engine.make_context("Strands.callback", "k");
        const idem::outcome<int> o = co_await idem::async_execute(engine, ctx, [] { return 6; }, idem::json_codec{},
                                                                  asio::use_awaitable_t<strand>{});
        if (o.is_replay() && o.value() == 5) ++answered;
      },
      asio::detached);
  io.run();
  CHECK(answered == 2);
}

TEST_CASE("completion tokens: use_future, deferred and a plain callback") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });

  auto ctx = engine.make_context("Tokens.future", "k");
  std::future<idem::outcome<int>> f = idem::async_execute(
      engine, ctx, [] { return 7; }, idem::json_codec{}, asio::bind_executor(io, asio::use_future));
  CHECK(f.get().value() == 7);

  auto op = idem::async_execute(engine, ctx, [] { return 8; }, idem::json_codec{}, asio::deferred);
  std::promise<int> replayed;
  std::move(op)(asio::bind_executor(io, [&](std::exception_ptr e, idem::outcome<int> o) {
    if (e) {
      replayed.set_exception(e);
    } else {
      replayed.set_value(o.is_replay() ? o.value() : -1);
    }
  }));
  CHECK(replayed.get_future().get() == 7);

  std::promise<std::thread::id> where;
  idem::async_execute(engine, engine.make_context("Tokens.callback", "k"), [] {},
                      asio::bind_executor(io, [&](std::exception_ptr, idem::outcome<void> o) {
                        where.set_value(o.ran() ? std::this_thread::get_id() : std::thread::id());
                      }));
  CHECK(where.get_future().get() == runner.get_id());  // the handler's executor
  guard.reset();
  runner.join();
}

// The initiation moves async_initiate's own copy of the context into the engine's call: a deferred
// call must have kept that copy, since the caller's context may be gone when it starts (under ASan a
// reference kept instead is a use after free; elsewhere the call would claim whatever key the freed
// bytes spell, and the replay below would not find it).
TEST_CASE("a deferred call keeps its own context: the caller's may be gone when it starts") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  const std::string key(40, 'k');  // beyond the short-string buffer: the context's copy is on the heap
  auto op = [&] {
    const idem::context ctx = engine.make_context("Tokens.deferred", key);
    return idem::async_execute(engine, ctx, [] { return 9; }, idem::json_codec{}, asio::deferred);
  }();
  int ran = -1;
  std::move(op)(asio::bind_executor(io, [&](std::exception_ptr e, idem::outcome<int> o) {
    ran = (!e && o.ran()) ? o.value() : -2;
  }));
  io.run();
  CHECK(ran == 9);
  const auto again = engine.execute(engine.make_context("Tokens.deferred", key), [] { return 10; }, idem::json_codec{});
  CHECK(again.is_replay());
  CHECK(again.value() == 9);
}

// From a coroutine (use_awaitable) the call is a coroutine of its own that suspends only to wait:
// the memory store answers at once, so the first call runs and the second replays before the
// handler queued ahead of them gets its turn. The awaitable keeps its own context, as a deferred
// call does.
TEST_CASE("from a coroutine, a call the store answers at once completes without a trip through the queue") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  std::vector<std::string> order;
  const std::string key(40, 'k');  // beyond the short-string buffer: the context's copy is on the heap
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::post(io, [&] { order.push_back("queued"); });
        auto first = [&] {
          const idem::context ctx = engine.make_context("At.once", key);
          return idem::async_execute(engine, ctx, [] { return 1L; }, idem::json_codec{}, asio::use_awaitable);
        }();
        const idem::outcome<long> ran = co_await std::move(first);
        const idem::outcome<long> again = co_await idem::async_execute(
            engine, engine.make_context("At.once", key), [] { return 2L; }, idem::json_codec{}, asio::use_awaitable);
        CHECK(ran.ran());
        CHECK(again.is_replay());
        CHECK(again.value() == 1);
        order.push_back("answered");
      },
      asio::detached);
  io.run();
  CHECK(order == std::vector<std::string>{"answered", "queued"});
}

// Any other token keeps Asio's rule: an answer at hand is queued, never handed over inside the
// initiating function.
TEST_CASE("a callback answered at once runs through the executor's queue, after the initiating function") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  bool initiating = true;
  int inside = 0, after = 0;
  for (int i = 0; i < 2; ++i) {  // the first call runs its action, the second replays
    idem::async_execute(engine, engine.make_context("At.once.callback", "k"), [] { return 3L; }, idem::json_codec{},
                        asio::bind_executor(io, [&](std::exception_ptr e, idem::outcome<long> o) {
                          if (!e && o.value() == 3) ++(initiating ? inside : after);
                        }));
  }
  initiating = false;
  io.run();
  CHECK(inside == 0);
  CHECK(after == 2);
}

TEST_CASE("bad input is the synchronous call's exception, through the token, before anything is acquired") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  idem::context bad = engine.make_context("Bad.input", "secret-key");
  bad.lease = 0ms;  // fails ctx.validate()
  idem::context join = engine.make_context("Bad.join", "secret-key");
  join.completion = idem::completion_mode::join_transaction;
  std::atomic<int> refused{0};
  std::atomic<int> leaked{0};
  for (const idem::context& ctx : {bad, join}) {
    idem::async_execute(engine, ctx, [] {}, [&](std::exception_ptr e, idem::outcome<void>) {
      try {
        std::rethrow_exception(e);
      } catch (const idem::configuration_error& error) {
        ++refused;
        if (std::string(error.what()).find("secret-key") != std::string::npos) ++leaked;
      } catch (...) {
      }
    });
  }
  CHECK(store.size() == 0);  // nothing acquired
  // Delivered through the handler's executor (a plain callback: the system executor).
  REQUIRE(eventually([&] { return refused == 2; }, 10s));
  CHECK(leaked == 0);
}

TEST_CASE("cancelled while waiting for a holder: operation_aborted, nothing stored changes") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  const auto holder_ctx = engine.make_context("Cancel.wait", "k", {.lease = 30s});
  auto held = store.try_acquire(holder_ctx);
  REQUIRE(std::holds_alternative<idem::acquired>(held));
  const idem::lease_token token = std::get<idem::acquired>(held).token;

  asio::cancellation_signal signal;
  bool aborted = false;
  bool ran = false;
  idem::async_execute(engine, engine.make_context("Cancel.wait", "k", {.wait = 30s}), [&] { ran = true; },
                      asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, sets_if_aborted(aborted))));
  REQUIRE(store.waiting() == 1);  // registered at once: the memory store answers inline or registers
  signal.emit(asio::cancellation_type::terminal);
  io.run();
  CHECK(aborted);
  CHECK_FALSE(ran);
  CHECK(store.waiting() == 0);
  // The holder still owns the record: its completion lands, and a duplicate replays it.
  store.complete(holder_ctx.id, token, idem::payload::none(), 1h);
  CHECK(std::holds_alternative<idem::duplicate>(store.try_acquire(holder_ctx)));

  // The same through awaitable operators: a timer wins the race.
  auto again = store.try_acquire(engine.make_context("Cancel.race", "k"));
  REQUIRE(std::holds_alternative<idem::acquired>(again));
  io.restart();
  bool timer_won = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        asio::steady_timer timer(io, 20ms);
        auto winner = co_await (idem::async_execute(engine, engine.make_context("Cancel.race", "k", {.wait = 30s}),
                                                    [] {}, asio::use_awaitable) ||
                                timer.async_wait(asio::use_awaitable));
        timer_won = winner.index() == 1;
      },
      asio::detached);
  io.run();
  CHECK(timer_won);
  CHECK(store.waiting() == 0);
}

TEST_CASE("a call that nothing can cancel hands its store no cancellation, and one that can be cancelled does") {
  idem::test::faulty_store store;
  std::vector<bool> handed;  // per claim, in order: whether the store was handed a cancellation
  store.before_async_acquire = [&](const idem::context&, const idem::cancellation* c) {
    handed.push_back(c != nullptr);
  };
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  const auto ctx = [&](const char* key) { return engine.make_context("Cancel.handed", key, {.wait = 30s}); };
  // Spawned detached, the coroutine's slot is connected to nothing: no request can ever come.
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const auto o = co_await idem::async_execute(engine, ctx("a"), [] {}, asio::use_awaitable);
        CHECK(o.ran());
      },
      asio::detached);
  // Raced against a timer, the awaitable operators connect a slot: the loser is cancelled.
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        asio::steady_timer timer(io, 30s);
        co_await (idem::async_execute(engine, ctx("b"), [] {}, asio::use_awaitable) ||
                  timer.async_wait(asio::use_awaitable));
      },
      asio::detached);
  io.run();
  CHECK(handed == std::vector<bool>{false, true});
}

TEST_CASE("cancelled while its action runs: the action decides, and a throw releases the record") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  asio::cancellation_signal signal;
  std::atomic<bool> started{false};
  bool aborted = false;
  const auto ctx = engine.make_context("Cancel.action", "k");
  idem::async_execute(engine, ctx,
                      [&]() -> asio::awaitable<void> {
                        started = true;
                        asio::steady_timer timer(co_await asio::this_coro::executor, 30s);
                        co_await timer.async_wait(asio::use_awaitable);  // throws operation_aborted
                      },
                      asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, sets_if_aborted(aborted))));
  while (!started) io.run_one();
  io.poll();  // the action is suspended on its timer now
  signal.emit(asio::cancellation_type::terminal);
  io.run();
  CHECK(aborted);
  // Released: the next call acquires and runs.
  CHECK(std::holds_alternative<idem::acquired>(store.try_acquire(ctx)));
}

TEST_CASE("an engine destroyed with calls pending: they finish on what they hold") {
  idem::memory_store store;
  auto engine = std::make_unique<idem::engine>(store, quiet_config());
  asio::io_context io;
  const auto held_ctx = engine->make_context("Destroyed.engine", "held");
  auto held = store.try_acquire(held_ctx);
  REQUIRE(std::holds_alternative<idem::acquired>(held));
  int answered = 0;
  for (int i = 0; i < 100; ++i) {
    idem::async_execute(*engine, engine->make_context("Destroyed.engine", "held", {.wait = 30s}), [] {},
                        asio::bind_executor(io, [&](std::exception_ptr e, idem::outcome<void> o) {
                          if (!e && o.is_replay()) ++answered;
                        }));
  }
  bool ran = false;
  idem::async_execute(*engine, engine->make_context("Destroyed.engine", "running"),
                      [&]() -> asio::awaitable<void> {
                        asio::steady_timer timer(co_await asio::this_coro::executor, 50ms);
                        co_await timer.async_wait(asio::use_awaitable);
                        ran = true;
                      },
                      asio::bind_executor(io, [&](std::exception_ptr e, idem::outcome<void> o) {
                        if (!e && o.ran()) ++answered;
                      }));
  REQUIRE(store.waiting() == 100);
  io.poll();  // the running action is suspended on its timer
  engine.reset();
  store.complete(held_ctx.id, std::get<idem::acquired>(held).token, idem::payload::none(), 1h);
  io.run();
  CHECK(ran);
  CHECK(answered == 101);
  CHECK(store.waiting() == 0);
}

TEST_CASE("a memory store destroyed with waiters pending answers them store_unavailable_error") {
  auto store = std::make_unique<idem::memory_store>();
  idem::context ctx{.id = {"Destroyed.store", "k"}, .ttl = 1h, .lease = 30s, .wait = 30s};
  ctx.validate();
  REQUIRE(std::holds_alternative<idem::acquired>(store->try_acquire(ctx)));
  std::atomic<int> unavailable{0};
  for (int i = 0; i < 10; ++i) {
    store->async_try_acquire(ctx, nullptr, [&](std::exception_ptr e, idem::acquire_result) {
      try {
        if (e) std::rethrow_exception(e);
      } catch (const idem::store_unavailable_error& error) {
        if (std::string(error.what()).find("Destroyed.store/#") != std::string::npos) ++unavailable;
      }
    });
  }
  REQUIRE(store->waiting() == 10);
  store.reset();
  CHECK(unavailable == 10);
}

// A store that loses a call destroys its handler uncalled. The call is then over: what it held
// is freed with the handler (LeakSanitizer checks that in the sanitized build), no work is counted
// for it (io.run() returns), and its heartbeat is gone, so its lease lapses and another caller
// takes the record over. Every completion form: a coroutine's and a callback's.
TEST_CASE("a store that drops a handler uncalled: the call ends with it, nothing leaks, its lease lapses") {
  idem::test::faulty_store store;
  std::atomic<int> dropped{0};
  store.keep_async_complete = [&](const idem::identity&) {
    ++dropped;
    return false;
  };
  store.keep_async_acquire = [&](const idem::context& ctx) {
    if (ctx.id.key() != "claim") return true;
    ++dropped;
    return false;
  };
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  int resumed = 0, called = 0;
  const auto options = idem::call_options{.lease = 300ms};
  for (const char* key : {"coroutine", "claim"}) {
    asio::co_spawn(
        io,
        [&, key]() -> asio::awaitable<void> {
          [[maybe_unused]] auto o = co_await idem::async_execute(
              engine, engine.make_context("Dropped", key, options), [] { return 1L; }, idem::json_codec{},
              asio::use_awaitable);
          ++resumed;
        },
        asio::detached);
  }
  idem::async_execute(engine, engine.make_context("Dropped", "callback", options), [] { return 1L; },
                      idem::json_codec{},
                      asio::bind_executor(io, [&](std::exception_ptr, idem::outcome<long>) { ++called; }));
  io.run();  // returns: nothing is left to wait for
  CHECK(dropped == 3);
  CHECK(resumed == 0);
  CHECK(called == 0);
  for (const char* key : {"coroutine", "callback"}) {
    // Nobody extends the lease any more: a caller that waits for the holder takes the record over
    // once it lapses (a heartbeat still running would keep it held past this wait).
    auto taken = store.try_acquire(engine.make_context("Dropped", key, {.lease = 300ms, .wait = 10s}));
    REQUIRE(std::holds_alternative<idem::acquired>(taken));
    CHECK(std::get<idem::acquired>(taken).took_over);
  }
}

namespace {

// What a look at `id` finds right now, without waiting.
std::string look(idem::store& store, const idem::identity& id) {
  idem::context ctx{.id = id, .ttl = 1h, .lease = 30s, .wait = 0ms};
  ctx.validate();
  auto answer = store.try_acquire(ctx);
  if (auto* a = std::get_if<idem::acquired>(&answer)) {
    store.release(id, a->token);
    return "free";
  }
  if (std::holds_alternative<idem::duplicate>(answer)) return "complete";
  return "held";
}

}  // namespace

TEST_CASE("an asynchronous call given a transaction completes its record when the transaction commits") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  asio::io_context io;
  const auto committed = engine.make_context("Tx.async", "committed");
  const auto rolled_back = engine.make_context("Tx.async", "rolled-back");
  std::vector<std::string> seen;
  int runs = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        {
          idem::test::unbound_transaction tx;
          auto o = co_await idem::async_execute(engine, committed, tx, [&] { return ++runs; }, idem::json_codec{},
                                                asio::use_awaitable);
          CHECK(o.ran());
          seen.push_back(look(store, committed.id));  // held until the commit
          tx.commit();
          seen.push_back(look(store, committed.id));
        }
        {
          idem::test::unbound_transaction tx;
          auto o = co_await idem::async_execute(engine, rolled_back, tx, [&] { return ++runs; }, idem::json_codec{},
                                                asio::use_awaitable);
          CHECK(o.ran());
          tx.rollback();
          seen.push_back(look(store, rolled_back.id));  // released: a retry runs again
        }
        // A thread's transaction plays no part: only the one handed to the call.
        auto alone = co_await idem::async_execute(engine, engine.make_context("Tx.async", "alone"),
                                                  [&] { return ++runs; }, idem::json_codec{}, asio::use_awaitable);
        CHECK(alone.ran());
        seen.push_back(look(store, idem::identity("Tx.async", "alone")));
      },
      asio::detached);
  io.run();
  CHECK(runs == 3);
  CHECK(seen == std::vector<std::string>{"held", "complete", "free", "complete"});
}

TEST_CASE("an asynchronous join-transaction call without a transaction, or on a store that cannot join, is refused") {
  idem::memory_store store;
  idem::engine engine{store, quiet_config()};
  idem::context join = engine.make_context("Tx.join", "k");
  join.completion = idem::completion_mode::join_transaction;
  idem::test::unbound_transaction tx;
  std::promise<std::string> refused;
  idem::async_execute(engine, join, tx, [] {}, [&](std::exception_ptr e, idem::outcome<void>) {
    try {
      std::rethrow_exception(e);
    } catch (const idem::configuration_error& error) {
      refused.set_value(error.what());
    } catch (...) {
      refused.set_value("another error");
    }
  });
  auto answer = refused.get_future();
  REQUIRE(answer.wait_for(10s) == std::future_status::ready);
  CHECK_THAT(answer.get(), Catch::Contains("cannot complete inside a caller's transaction"));
  CHECK(store.size() == 0);
}
