// The heartbeat keeps a lease alive while its action runs longer than the lease.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <future>
#include <latch>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <idem/idem.hpp>

#include "../../runtime/core/heartbeat_scheduler.hpp"
#include "support/faulty_store.hpp"

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

// Found in CI (fault.sqlite.extend_under_write_lock_contention on a loaded machine): one extend that
// gave up on SQLite's write lock cost the lease, because the next try came a whole period later,
// when the lease had already lapsed, and another store stole the record.
TEST_CASE("heartbeat: a failed extend is tried again before the lease lapses", "[engine][heartbeat][concurrency]") {
  idem::test::faulty_store store;
  std::atomic<int> extends = 0;
  std::promise<idem::acquire_result> thief_at_retry;
  store.before_extend = [&](const idem::identity& id) {
    const int n = ++extends;
    if (n == 1) throw idem::store_unavailable_error("injected: the write lock stayed busy");
    // The retry: a thief asking now must still find the record held, not lapsed.
    if (n == 2) thief_at_retry.set_value(store.try_acquire({.id = id, .lease = 2s, .wait = 0ms}));
    return true;
  };
  idem::engine engine(store);
  auto retried = thief_at_retry.get_future();
  std::future_status status{};
  auto o = engine.execute(engine.make_context("S.m", "k", {.lease = 2s}), [&] {
    status = retried.wait_for(30s);  // the first extend is due after 1 s, its retry 250 ms later
  });
  REQUIRE(status == std::future_status::ready);
  const idem::acquire_result thief = retried.get();
  CHECK(std::holds_alternative<idem::in_flight>(thief));
  CHECK(o.ran());
}

TEST_CASE("heartbeat: every stripe extends the leases registered from its threads", "[engine][heartbeat][concurrency]") {
  idem::test::faulty_store store;
  constexpr int holders = 4;
  std::array<std::atomic<int>, holders> extends{};
  store.before_extend = [&](const idem::identity& id) {
    ++extends[static_cast<std::size_t>(id.key().back() - '0')];
    return true;
  };
  idem::detail::heartbeat_stripes stripes(store, [](const idem::log_record&) {}, 2);
  CHECK(stripes.size() == 2);
  CHECK(stripes.threads() == 2);  // one leader each, started with them
  std::vector<idem::context> contexts;
  for (int i = 0; i < holders; ++i)
    contexts.push_back({.id = idem::identity("S.m", "k" + std::to_string(i)), .lease = 1s});
  std::vector<idem::detail::heartbeat_scheduler::handle> held(holders);
  {
    std::vector<std::jthread> threads;  // one registration per thread: the threads take turns over the stripes
    for (int i = 0; i < holders; ++i)
      threads.emplace_back([&, i] {
        const auto token = std::get<idem::acquired>(store.try_acquire(contexts[i])).token;
        held[static_cast<std::size_t>(i)] = stripes.start(contexts[i].id, token, 1s);
      });
  }
  // Two extends each take one lease (every 500 ms); the lease lapses only if an extend is 500 ms late.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  auto all_extended_twice = [&] {
    return std::all_of(extends.begin(), extends.end(), [](const std::atomic<int>& n) { return n.load() >= 2; });
  };
  while (!all_extended_twice() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  CHECK(all_extended_twice());
  for (const idem::context& ctx : contexts)
    CHECK(std::holds_alternative<idem::in_flight>(store.try_acquire({.id = ctx.id, .wait = 0ms})));
}

TEST_CASE("heartbeat: a reused slot extends its new registrant's record, copied at its first extend",
          "[engine][heartbeat][concurrency]") {
  // A registration refers to the caller's identity until its first extend copies it into the slot,
  // whose storage a later registration reuses: that one must be extended under its own identity,
  // never the copy the slot kept from before.
  idem::test::faulty_store store;
  std::mutex mutex;
  std::condition_variable extended;
  std::vector<std::string> keys;  // of every extend, in order
  store.before_extend = [&](const idem::identity& id) {
    {
      std::lock_guard lock(mutex);
      keys.push_back(id.key());
    }
    extended.notify_all();
    return true;
  };
  const auto extends_of = [&](const std::string& key) {
    return std::count(keys.begin(), keys.end(), key);
  };
  idem::detail::heartbeat_scheduler scheduler(store, [](const idem::log_record&) {});
  const idem::context first{.id = idem::identity("S.m", "first-key"), .lease = 40ms};
  const idem::context second{.id = idem::identity("S.m", "second-key"), .lease = 40ms};
  {
    auto held = scheduler.start(first.id, std::get<idem::acquired>(store.try_acquire(first)).token, first.lease);
    std::unique_lock lock(mutex);
    REQUIRE(extended.wait_for(lock, 10s, [&] { return extends_of("first-key") >= 2; }));
  }  // cancelled: its slot is free, and keeps the copy of "first-key"
  std::size_t before_second;
  {
    std::lock_guard lock(mutex);
    before_second = keys.size();
  }
  {
    auto held = scheduler.start(second.id, std::get<idem::acquired>(store.try_acquire(second)).token, second.lease);
    std::unique_lock lock(mutex);
    REQUIRE(extended.wait_for(lock, 10s, [&] { return extends_of("second-key") >= 2; }));
    // Still held: checked before the cancel, after which its lease soon lapses.
    CHECK(std::holds_alternative<idem::in_flight>(store.try_acquire({.id = second.id, .wait = 0ms})));
  }
  std::lock_guard lock(mutex);
  // At most one extend of the first record may have been running when it was cancelled.
  CHECK(std::count(keys.begin() + static_cast<std::ptrdiff_t>(before_second), keys.end(), "first-key") <= 1);
}

namespace {

// Counts the extends of every key that faulty_store sees, and lets a test wait for them.
struct extend_counter {
  std::mutex mutex;
  std::condition_variable extended;
  std::map<std::string, int> extends;

  explicit extend_counter(idem::test::faulty_store& store) {
    store.before_extend = [this](const idem::identity& id) {
      {
        std::lock_guard lock(mutex);
        ++extends[id.key()];
      }
      extended.notify_all();
      return true;
    };
  }
  int of(const std::string& key) {
    std::lock_guard lock(mutex);
    return extends[key];
  }
  bool wait_for(const std::string& key, int count) {
    std::unique_lock lock(mutex);
    return extended.wait_for(lock, 10s, [&] { return extends[key] >= count; });
  }
};

idem::lease_token acquire(idem::test::faulty_store& store, const idem::identity& id, std::chrono::milliseconds lease) {
  return std::get<idem::acquired>(store.try_acquire({.id = id, .lease = lease})).token;
}

// Polls a state that no event announces, for at most 10 s.
template <class Predicate>
bool eventually(Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

TEST_CASE("heartbeat: a registration kept on its own thread is found, extended, and never extended after its cancel",
          "[engine][heartbeat][concurrency]") {
  idem::test::faulty_store store;
  extend_counter counter(store);
  // Looks every 2 ms: leases of 16 ms and more register on their thread.
  idem::detail::heartbeat_scheduler scheduler(store, [](const idem::log_record&) {}, std::chrono::minutes(1), 2ms);
  const idem::identity first("S.m", "first"), held("S.m", "held"), sentinel("S.m", "sentinel");
  CHECK_FALSE(scheduler.registers_young());
  {
    // Under the lock; turns the way on. A 10 s lease: its first extend is due 5 s later, long after
    // this cancel, however slowly the test runs.
    auto h = scheduler.start_here(first, acquire(store, first, 10s), 10s);
  }
  CHECK(scheduler.registers_young());
  CHECK(scheduler.adopted_young() == 0);
  {
    auto h = scheduler.start_here(held, acquire(store, held, 40ms), 40ms);
    REQUIRE(counter.wait_for("held", 3));  // found by the leader, then extended every 20 ms
    CHECK(scheduler.adopted_young() == 1);
    CHECK(std::holds_alternative<idem::in_flight>(store.try_acquire({.id = held, .wait = 0ms})));
  }
  const int at_cancel = counter.of("held");
  {
    auto h = scheduler.start_here(sentinel, acquire(store, sentinel, 40ms), 40ms);
    REQUIRE(counter.wait_for("sentinel", 3));  // the cancelled one would have been due meanwhile
  }
  CHECK(counter.of("held") <= at_cancel + 1);  // at most the extend that was running at its cancel
  CHECK(counter.of("first") == 0);             // cancelled before its first extend was due
}

TEST_CASE("heartbeat: nested registrations on one thread, more than its own list holds, are all kept",
          "[engine][heartbeat][concurrency]") {
  idem::test::faulty_store store;
  extend_counter counter(store);
  idem::detail::heartbeat_scheduler scheduler(store, [](const idem::log_record&) {}, std::chrono::minutes(1), 2ms);
  std::vector<idem::identity> ids;
  for (int i = 0; i < 12; ++i) ids.emplace_back("S.m", "nested-" + std::to_string(i));
  {
    auto warm = scheduler.start_here(ids[0], acquire(store, ids[0], 40ms), 40ms);
  }
  std::vector<idem::detail::heartbeat_scheduler::handle> handles;
  for (const idem::identity& id : ids) handles.push_back(scheduler.start_here(id, acquire(store, id, 40ms), 40ms));
  for (const idem::identity& id : ids) CHECK(counter.wait_for(id.key(), 2));
  CHECK(scheduler.adopted_young() >= 8);  // the thread's list holds 8; the rest registered under the lock
  std::vector<int> at_cancel;
  while (!handles.empty()) handles.pop_back();  // the innermost first, as nested calls end
  for (const idem::identity& id : ids) at_cancel.push_back(counter.of(id.key()));
  const idem::identity sentinel("S.m", "sentinel");
  {
    auto h = scheduler.start_here(sentinel, acquire(store, sentinel, 40ms), 40ms);
    REQUIRE(counter.wait_for("sentinel", 3));
  }
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(counter.of(ids[i].key()) <= at_cancel[i] + 1);
}

TEST_CASE("heartbeat: the leader stops looking at threads' registrations when none are made, and starts again",
          "[engine][heartbeat][concurrency]") {
  idem::test::faulty_store store;
  extend_counter counter(store);
  // Unused for 20 ms (ten looks), the lock-free way turns off.
  idem::detail::heartbeat_scheduler scheduler(store, [](const idem::log_record&) {}, 20ms, 2ms);
  const idem::identity id("S.m", "again");
  const idem::lease_token first = acquire(store, id, 40ms);
  {
    auto h = scheduler.start_here(id, first, 40ms);
  }
  store.release(id, first);
  CHECK(scheduler.registers_young());
  REQUIRE(eventually([&] { return !scheduler.registers_young(); }));
  auto h = scheduler.start_here(id, acquire(store, id, 40ms), 40ms);
  CHECK(scheduler.registers_young());
  CHECK(counter.wait_for("again", 2));
}

TEST_CASE("heartbeat: threads registering on their own lists while the leader turns that way on and off",
          "[engine][heartbeat][concurrency]") {
  idem::test::faulty_store store;
  extend_counter counter(store);
  // Turned off after 5 ms unused, looked at every millisecond: the switch flips while threads register.
  idem::detail::heartbeat_scheduler scheduler(store, [](const idem::log_record&) {}, 5ms, 1ms);
  constexpr int threads_count = 4;
  std::atomic<int> never_found = 0;  // Catch's assertions are for the test's own thread
  std::vector<std::jthread> threads;
  for (int t = 0; t < threads_count; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const idem::identity id("S.m", "t" + std::to_string(t) + "-" + std::to_string(i));
        auto h = scheduler.start_here(id, acquire(store, id, 8ms), 8ms);
        if (i % 50 == 49) {
          // Held until the leader has found it: it is then extended, and cancelled through the lock.
          const std::size_t before = scheduler.adopted_young();
          if (!eventually([&] { return scheduler.adopted_young() > before || !scheduler.registers_young(); }))
            ++never_found;
        } else if (i % 20 == 0) {
          std::this_thread::sleep_for(7ms);  // idle long enough for the leader to turn the way off
        }
      }
    });
  threads.clear();  // joined
  CHECK(never_found == 0);
  const idem::identity last("S.m", "last");
  auto h = scheduler.start_here(last, acquire(store, last, 8ms), 8ms);
  CHECK(counter.wait_for("last", 3));  // the scheduler still keeps leases after all that
}

TEST_CASE("heartbeat: a synchronous call registered on its own thread keeps its lease for as long as it runs",
          "[engine][heartbeat][concurrency]") {
  // 2 s leases are the shortest an engine registers without a lock (8 looks of 250 ms).
  idem::test::faulty_store store;
  extend_counter counter(store);
  idem::engine engine(store);
  (void)engine.execute(engine.make_context("S.m", "warm-up", {.lease = 2s}), [] {});  // turns that way on
  std::latch started(1), finish(1);
  std::jthread holder([&] {
    (void)engine.execute(engine.make_context("S.m", "long", {.lease = 2s}), [&] {
      started.count_down();
      finish.wait();
    });
  });
  started.wait();
  REQUIRE(counter.wait_for("long", 2));  // found by the leader, then extended every second: past its first lease
  auto duplicate = engine.execute(engine.make_context("S.m", "long", {.lease = 2s, .wait = 0ms}), [] {});
  CHECK(std::holds_alternative<idem::in_flight>(duplicate));
  finish.count_down();
  holder.join();
  CHECK(counter.of("warm-up") == 0);
}
