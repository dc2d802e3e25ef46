// tests/unit/async_core_test.cpp — what the asynchronous operations are built on: the blocking
// pool of the default store operations, the timer queue of the memory store's waits, and
// idem::cancellation.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <idem/async.hpp>

#include "../../runtime/core/blocking_pool.hpp"
#include "../../runtime/core/timer_queue.hpp"

using namespace std::chrono_literals;

TEST_CASE("blocking_pool: tasks posted to an idle pool at once run at the same time") {
  idem::detail::blocking_pool pool(4);
  std::promise<void> warm;
  pool.post([&] { warm.set_value(); });
  warm.get_future().wait();  // one thread exists and is idle now (or about to be)
  // The first task blocks until the second runs: both need a thread (a waiting duplicate and
  // the call that ends its wait). Counting idle threads, not queued tasks, ran them one by one.
  std::promise<void> second_ran;
  std::shared_future<void> second = second_ran.get_future().share();
  std::promise<bool> first_done;
  pool.post([&] { first_done.set_value(second.wait_for(10s) == std::future_status::ready); });
  pool.post([&] { second_ran.set_value(); });
  auto done = first_done.get_future();
  REQUIRE(done.wait_for(20s) == std::future_status::ready);
  CHECK(done.get());
  CHECK(pool.threads() <= 4);
}

TEST_CASE("blocking_pool: never more threads than its bound, the rest queue") {
  std::atomic<int> ran{0};
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  auto pool = std::make_unique<idem::detail::blocking_pool>(2);
  for (int i = 0; i < 10; ++i) pool->post([&] {
      gate.wait();
      ++ran;
    });
  CHECK(pool->threads() == 2);
  release.set_value();
  pool.reset();  // runs what is queued, then joins
  CHECK(ran == 10);
}

TEST_CASE("timer_queue: callbacks run in due order, a cancelled one never, on one thread") {
  idem::detail::timer_queue timers;
  CHECK(timers.threads() == 0);
  const auto now = std::chrono::steady_clock::now();
  std::vector<int> order;
  std::promise<void> last;
  timers.schedule(now + 30ms, [&] { order.push_back(3); last.set_value(); });
  timers.schedule(now + 10ms, [&] { order.push_back(1); });
  const auto cancelled = timers.schedule(now + 20ms, [&] { order.push_back(2); });
  CHECK(timers.cancel(cancelled));
  CHECK_FALSE(timers.cancel(cancelled));
  REQUIRE(last.get_future().wait_for(10s) == std::future_status::ready);
  CHECK(order == std::vector<int>{1, 3});
  CHECK(timers.threads() == 1);
}

// The queue's thread sleeps until its first entry is due; cancelling that entry frees it while the
// thread sleeps (it read the due time from the freed entry: AddressSanitizer's heap-use-after-free).
TEST_CASE("timer_queue: the entry the thread sleeps for can be cancelled") {
  auto timers = std::make_unique<idem::detail::timer_queue>();
  const auto far = timers->schedule(std::chrono::steady_clock::now() + 1h, [] {});
  std::promise<void> passed;
  timers->schedule(std::chrono::steady_clock::now(), [&] { passed.set_value(); });
  REQUIRE(passed.get_future().wait_for(10s) == std::future_status::ready);
  // The thread goes to sleep for `far` next; nothing announces it, so give it a moment.
  std::this_thread::sleep_for(20ms);
  CHECK(timers->cancel(far));
  timers.reset();  // wakes the thread, which must not read the cancelled entry
}

TEST_CASE("cancellation: a request runs the installed handler once, and one before install refuses it") {
  idem::cancellation c;
  int runs = 0;
  REQUIRE(c.install([&] { ++runs; }));
  c.request();
  c.request();
  CHECK(runs == 1);
  CHECK(c.requested());
  CHECK_FALSE(c.install([&] { ++runs; }));  // requested already: the operation ends at once
  CHECK(runs == 1);

  idem::cancellation cleared;
  REQUIRE(cleared.install([&] { ++runs; }));
  cleared.clear();
  cleared.request();
  CHECK(runs == 1);  // cleared: the handler is gone

  // clear() from the handler itself does not wait for itself.
  idem::cancellation self;
  REQUIRE(self.install([&] {
    self.clear();
    ++runs;
  }));
  self.request();
  CHECK(runs == 2);
}
