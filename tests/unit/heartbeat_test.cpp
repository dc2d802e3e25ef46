// The heartbeat keeps a lease alive while its action runs longer than the lease.
#include <catch2/catch.hpp>

#include <atomic>
#include <latch>
#include <thread>

#include <idem/idem.hpp>

using namespace std::chrono_literals;

TEST_CASE("heartbeat: an action that outlives its lease is not stolen", "[engine][heartbeat][concurrency]") {
  idem::memory_store store;
  idem::engine engine(store);
  std::latch started(1), finish(1);
  std::atomic<int> runs = 0;
  std::jthread holder([&] {
    (void)engine.execute(engine.make_context("S.m", "k", {.lease = 100ms}), [&] {
      ++runs;
      started.count_down();
      finish.wait();
    });
  });
  started.wait();
  // Several lease lengths pass: without the heartbeat the record would be stealable by now.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(100ms);
    auto o = engine.execute(engine.make_context("S.m", "k", {.lease = 100ms, .wait = 0ms}), [&] { ++runs; });
    CHECK(std::holds_alternative<idem::in_flight>(o));
  }
  finish.count_down();
  holder.join();
  CHECK(runs == 1);
  CHECK(std::holds_alternative<idem::replayed<void>>(engine.execute(engine.make_context("S.m", "k"), [&] { ++runs; })));
}

TEST_CASE("heartbeat: many holders with different leases all keep theirs", "[engine][heartbeat][concurrency]") {
  idem::memory_store store;
  idem::engine engine(store);
  constexpr int holders = 12;
  std::latch started(holders), finish(1);
  std::vector<std::jthread> threads;
  for (int i = 0; i < holders; ++i)
    threads.emplace_back([&, i] {
      const auto lease = std::chrono::milliseconds(60 + 20 * (i % 4));
      (void)engine.execute(engine.make_context("S.m", std::string("k") + std::to_string(i), {.lease = lease}), [&] {
        started.count_down();
        finish.wait();
      });
    });
  started.wait();
  std::this_thread::sleep_for(400ms);  // more than three times the longest lease
  for (int i = 0; i < holders; ++i) {
    INFO("holder " << i);
    auto o = engine.execute(engine.make_context("S.m", std::string("k") + std::to_string(i), {.wait = 0ms}), [] {});
    CHECK(std::holds_alternative<idem::in_flight>(o));
  }
  finish.count_down();
}

TEST_CASE("heartbeat: without a live holder the lease expires and is stolen", "[engine][heartbeat]") {
  // The contrast to the tests above: a holder that stopped heartbeating (here: a raw store
  // acquisition with no engine behind it) loses the record after its lease.
  idem::memory_store store;
  idem::engine engine(store);
  idem::context ctx{.id = idem::identity("S.m", "k"), .lease = 50ms, .wait = 0ms};
  REQUIRE(std::holds_alternative<idem::acquired>(store.try_acquire(ctx)));
  std::this_thread::sleep_for(120ms);
  int runs = 0;
  CHECK(std::holds_alternative<idem::executed<void>>(engine.execute(engine.make_context("S.m", "k"), [&] { ++runs; })));
  CHECK(runs == 1);
}
