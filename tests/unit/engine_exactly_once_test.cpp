// Paths where work could run twice or be lost silently: each case failed before its fix.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <latch>
#include <thread>

#include <idem/idem.hpp>
#include <idem/transaction.hpp>

#include "../../runtime/core/heartbeat_scheduler.hpp"
#include "engine_support.hpp"
#include "support/faulty_store.hpp"

using namespace std::chrono_literals;
using idem::test::faulty_store;
using idem::test::recording_listener;
using idem::test::recording_log;
using idem::test::test_transaction;

namespace {

struct action_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

idem::log_sink throwing_sink() {
  return [](const idem::log_record&) { throw std::runtime_error("the log sink is broken"); };
}

bool replays(idem::engine& engine, const char* scope, const char* key) {
  int runs = 0;
  auto o = engine.execute(engine.make_context(scope, key, {.wait = 0ms}), [&] { ++runs; });
  return std::holds_alternative<idem::replayed<void>>(o) && runs == 0;
}

bool executes(idem::engine& engine, const char* scope, const char* key) {
  int runs = 0;
  auto o = engine.execute(engine.make_context(scope, key, {.wait = 0ms}), [&] { ++runs; });
  return std::holds_alternative<idem::executed<void>>(o) && runs == 1;
}

// Fails the registration of a given callback kind, as an allocation failure would.
class refusing_transaction : public idem::basic_transaction {
 public:
  bool refuse_after_commit = false;
  bool refuse_before_commit = false;
  refusing_transaction() : binding_(*this) {}
  ~refusing_transaction() override { finish_rollback(); }
  void after_commit(std::function<void()> callback) override {
    if (refuse_after_commit) throw std::bad_alloc();
    basic_transaction::after_commit(std::move(callback));
  }
  void before_commit(std::function<void()> check) override {
    if (refuse_before_commit) throw std::bad_alloc();
    basic_transaction::before_commit(std::move(check));
  }

 private:
  idem::transaction_binding binding_;
};

}  // namespace

// Defect 2 -------------------------------------------------------------------------------------

TEST_CASE("engine/once: a transaction committed inside the action completes the record when the action returns",
          "[engine][transaction]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  {
    test_transaction tx;
    auto o = engine.execute(engine.make_context("S.m", "k"), [&] { tx.commit(); });
    CHECK(std::holds_alternative<idem::executed<void>>(o));
  }
  CHECK(listener->events() == std::vector<std::string>{"acquired", "completed"});
  CHECK(replays(engine, "S.m", "k"));
}

TEST_CASE("engine/once: a transaction rolled back inside the action releases the record",
          "[engine][transaction]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  {
    test_transaction tx;
    auto o = engine.execute(engine.make_context("S.m", "k"), [&] { tx.rollback(); });
    CHECK(std::holds_alternative<idem::executed<void>>(o));
  }
  CHECK(listener->events() == std::vector<std::string>{"acquired", "failed:rollback"});
  CHECK(executes(engine, "S.m", "k"));
}

TEST_CASE("engine/once: callbacks registered on an ended transaction run at once or never, by its outcome",
          "[engine][transaction]") {
  int commits = 0, rollbacks = 0;
  {
    test_transaction tx;
    tx.commit();
    tx.after_commit([&] { ++commits; });
    tx.after_rollback([&] { ++rollbacks; });
    CHECK_THROWS_AS(tx.before_commit([] {}), idem::error);
  }
  CHECK(commits == 1);
  CHECK(rollbacks == 0);
  {
    test_transaction tx;
    tx.rollback();
    tx.after_commit([&] { ++commits; });
    tx.after_rollback([&] { ++rollbacks; });
  }
  CHECK(commits == 1);
  CHECK(rollbacks == 1);
}

// Defect 5 -------------------------------------------------------------------------------------

TEST_CASE("engine/once: a slow extend of one record does not let another record's lease lapse",
          "[engine][heartbeat][concurrency]") {
  // One scheduler (one heartbeat stripe): the two records must share it for the defect to show.
  faulty_store store;
  std::latch slow_extend_entered(1);
  std::latch unblock(1);
  std::atomic<bool> first_slow_call = true;
  store.before_extend = [&](const idem::identity& id) {
    if (id.scope() == "Slow.m" && first_slow_call.exchange(false)) {
      slow_extend_entered.count_down();
      unblock.wait();  // stuck like a lock wait, until the test is done
    }
    return true;
  };
  idem::detail::heartbeat_scheduler scheduler(store, [](const idem::log_record&) {});
  const idem::context slow_ctx{.id = idem::identity("Slow.m", "k"), .lease = 40ms};
  const idem::context fast_ctx{.id = idem::identity("Fast.m", "k"), .lease = 60ms};
  const auto slow_held = scheduler.start(slow_ctx.id, std::get<idem::acquired>(store.try_acquire(slow_ctx)).token, 40ms);
  slow_extend_entered.wait();  // one heartbeat thread is now blocked inside the store
  const auto fast_held = scheduler.start(fast_ctx.id, std::get<idem::acquired>(store.try_acquire(fast_ctx)).token, 60ms);
  // Several of Fast's leases pass while Slow's extend is stuck: Fast must still be held.
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(60ms);
    INFO("round " << i);
    CHECK(std::holds_alternative<idem::in_flight>(store.try_acquire({.id = fast_ctx.id, .wait = 0ms})));
  }
  unblock.count_down();
}

// Found by the soak (tests/reliability/soak.cpp): a 500 ms lease lost while 5 s leases were held.
TEST_CASE("engine/once: a short lease is extended on time while the heartbeat leader sleeps for a longer one",
          "[engine][heartbeat][concurrency]") {
  // The leader hands leadership to another thread while it extends. The new leader, seeing only
  // the long lease's list, sleeps until that one is due; the extended short entry is linked again
  // after that and must wake it, or its next extend waits for the long lease's period.
  // One scheduler, as one engine thread's heartbeat stripe has (heartbeat_stripes): both leases
  // must share a scheduler for the defect to show.
  faulty_store store;
  std::atomic<int> short_extends = 0;
  store.before_extend = [&](const idem::identity& id) {
    if (id.scope() == "Short.m" && short_extends.fetch_add(1) == 0)
      std::this_thread::sleep_for(30ms);  // a slow first extend: the next leader is asleep before it returns
    return true;
  };
  idem::detail::heartbeat_scheduler scheduler(store, [](const idem::log_record&) {});
  const idem::context long_ctx{.id = idem::identity("Long.m", "k"), .lease = 60s};
  const idem::context short_ctx{.id = idem::identity("Short.m", "k"), .lease = 100ms};
  const auto long_held = scheduler.start(long_ctx.id, std::get<idem::acquired>(store.try_acquire(long_ctx)).token, 60s);
  const auto short_held =
      scheduler.start(short_ctx.id, std::get<idem::acquired>(store.try_acquire(short_ctx)).token, 100ms);
  // Every 50 ms when it works; once in the long lease's 30 s period when the wake-up is missed.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (short_extends.load() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  CHECK(short_extends.load() >= 4);
  CHECK(std::holds_alternative<idem::in_flight>(store.try_acquire({.id = short_ctx.id, .wait = 0ms})));
}

TEST_CASE("engine/once: a hand-built context with a lease under 2 ms is refused, not spun on", "[engine]") {
  idem::memory_store store;
  idem::engine engine(store);
  const idem::context ctx{.id = idem::identity("S.m", "k"), .lease = 1ms};
  int runs = 0;
  CHECK_THROWS_WITH(engine.execute(ctx, [&] { ++runs; }), Catch::Contains("lease") && Catch::Contains("2 ms"));
  CHECK(runs == 0);
  CHECK(store.size() == 0);
}

TEST_CASE("engine/once: the heartbeat's idle wake-up interval recovers once short leases are gone",
          "[engine][heartbeat]") {
  idem::memory_store store;
  idem::detail::heartbeat_scheduler scheduler(store, [](const idem::log_record&) {}, 50ms);
  const idem::identity id("S.m", "k");
  { auto h = scheduler.start(id, idem::lease_token::generate(), 4ms); }
  { auto h = scheduler.start(id, idem::lease_token::generate(), 30s); }
  CHECK(scheduler.idle_period() == 2ms);
  // Once the 4 ms lease length has been unused for longer than forget_after, the leader, idle,
  // drops it and wakes at the 30 s length's period again.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (scheduler.idle_period() != 15s && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  CHECK(scheduler.idle_period() == 15s);
}

// Defect 6 -------------------------------------------------------------------------------------

TEST_CASE("engine/once: a throwing log sink changes nothing on any path", "[engine]") {
  faulty_store store;
  store.before_release = [](const idem::identity&) { throw idem::store_unavailable_error("release is down"); };
  std::atomic<bool> complete_fails = false;
  store.before_complete = [&](const idem::identity&) {
    if (complete_fails) throw idem::store_unavailable_error("complete is down");
  };
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {.failure_policy = idem::completion_failure_policy::log_and_return},
                      {.listeners = {listener}, .log = throwing_sink()});

  // The release fails and is logged: the action's exception still propagates and on_failed fires.
  CHECK_THROWS_AS(engine.execute(engine.make_context("S.m", "a"), [] { throw action_failed("boom"); }), action_failed);
  CHECK(listener->events() == std::vector<std::string>{"acquired", "failed:action"});

  // log_and_return: the completion failure is logged, and the call still returns executed.
  complete_fails = true;
  auto o = engine.execute(engine.make_context("S.m", "b"), [] {});
  CHECK(std::holds_alternative<idem::executed<void>>(o));

  // After a commit: the completion failure is logged and still reported to the listener.
  {
    test_transaction tx;
    (void)engine.execute(engine.make_context("S.m", "c"), [] {});
    tx.commit();
  }
  CHECK(listener->events() == std::vector<std::string>{"acquired", "failed:action", "acquired", "failed:completion",
                                                       "acquired", "failed:completion"});
}

// Defect 7 -------------------------------------------------------------------------------------

TEST_CASE("engine/once: a failure to join the transaction right after acquiring releases the record",
          "[engine][transaction]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  for (bool refuse_after : {true, false}) {
    INFO("refusing " << (refuse_after ? "after_commit" : "before_commit"));
    const char* key = refuse_after ? "k1" : "k2";
    int runs = 0;
    {
      refusing_transaction tx;
      tx.refuse_after_commit = refuse_after;
      tx.refuse_before_commit = !refuse_after;
      CHECK_THROWS_AS(engine.execute(engine.make_context("S.m", key), [&] { ++runs; }), std::bad_alloc);
    }
    CHECK(runs == 0);
    // Released: the key is free at once, not held in flight for a lease.
    CHECK(executes(engine, "S.m", key));
  }
}

// Defect 10 ------------------------------------------------------------------------------------

TEST_CASE("engine/once: a holder whose lease lapsed while its transaction was open cannot commit its work",
          "[engine][transaction]") {
  faulty_store store;
  std::atomic<bool> paused = false;
  // A paused process sends no heartbeat.
  store.before_extend = [&](const idem::identity&) { return !paused.load(); };
  auto listener = std::make_shared<recording_listener>();
  recording_log log;
  idem::engine engine(store, {}, {.listeners = {listener}, .log = log.sink()});
  int runs = 0;
  {
    test_transaction tx;
    auto o = engine.execute(engine.make_context("S.m", "k", {.lease = 40ms}), [&] { ++runs; });
    CHECK(std::holds_alternative<idem::executed<void>>(o));
    paused = true;
    std::this_thread::sleep_for(100ms);  // the lease expires
    // Another worker (a thread outside the transaction) steals the record, runs and completes it.
    bool stolen = false;
    std::thread([&] {
      auto second = engine.execute(engine.make_context("S.m", "k", {.wait = 0ms}), [&] { ++runs; });
      stolen = std::holds_alternative<idem::executed<void>>(second);
    }).join();
    CHECK(stolen);
    paused = false;
    // The first holder wakes and commits: the commit is refused, so its work is not committed twice.
    CHECK_THROWS_AS(tx.commit(), idem::lease_lost_error);
    CHECK_FALSE(tx.active());
  }
  CHECK(runs == 2);
  const auto events = listener->events();
  CHECK(events == std::vector<std::string>{"acquired", "acquired", "completed", "failed:completion"});
  CHECK_THROWS_AS(std::rethrow_exception(listener->last_cause()), idem::lease_lost_error);
  CHECK(replays(engine, "S.m", "k"));
}

TEST_CASE("engine/once: a lost lease is never reported as 'a later duplicate will run it again'", "[engine]") {
  faulty_store store;
  // The completion finds the record taken over, as after a pause past the lease.
  store.before_complete = [](const idem::identity&) { throw idem::lease_lost_error("complete: held by another token"); };
  recording_log log;
  idem::engine engine(store, {.failure_policy = idem::completion_failure_policy::log_and_return}, {.log = log.sink()});
  (void)engine.execute(engine.make_context("S.m", "k"), [] {});
  const auto records = log.get();
  REQUIRE(records.size() == 1);
  CHECK_THAT(records[0].message, Catch::Contains("may have run twice") && !Catch::Contains("run it again"));
}

// Defect 8 -------------------------------------------------------------------------------------

TEST_CASE("engine/once: fingerprints longer than 128 hex characters are refused when the context is made",
          "[engine]") {
  idem::memory_store store;
  idem::engine engine(store);
  CHECK_NOTHROW(engine.make_context("S.m", "k", {}, std::string(128, 'a')));
  CHECK_THROWS_WITH(engine.make_context("S.m", "k", {}, std::string(129, 'a')),
                    Catch::Contains("at most 128") && !Catch::Contains("aaaa"));
}

// Defect 9 -------------------------------------------------------------------------------------

TEST_CASE("engine/once: the engine purges expired records on its schedule", "[engine]") {
  idem::memory_store store;
  idem::engine engine(store, {.purge_interval = 20ms});
  for (const char* key : {"a", "b", "c"})
    (void)engine.execute(engine.make_context("S.m", key, {.ttl = 1ms}), [] {});
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (store.size() != 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  CHECK(store.size() == 0);
}

TEST_CASE("engine/once: purge_interval is validated and read from JSON", "[engine]") {
  CHECK(idem::config{}.purge_interval == 1h);
  CHECK(idem::config::from_json(R"({"purge_interval": "PT0S"})").purge_interval == 0ms);
  CHECK_THROWS_WITH((idem::config{.purge_interval = -1ms}.validate()), Catch::Contains("purge_interval"));
}

// The outcome's accessors --------------------------------------------------------------------------

TEST_CASE("engine: execute deduces the value type, and outcome answers without unpacking the variant", "[engine]") {
  idem::memory_store store;
  idem::engine engine(store);
  const auto ctx = engine.make_context("S.value", "k");
  auto first = engine.execute(ctx, [] { return std::string("first"); }, idem::json_codec{});
  static_assert(std::is_same_v<decltype(first), idem::outcome<std::string>>);
  CHECK(first.ran());
  CHECK_FALSE(first.is_replay());
  CHECK(first.has_value());
  CHECK(first.value() == "first");
  auto second = engine.execute(ctx, [] { return std::string("second"); }, idem::json_codec{});
  CHECK(second.is_replay());
  CHECK(std::move(second).value() == "first");

  // In flight: no value, the holder's remaining lease.
  std::latch started(1), finish(1);
  std::jthread holder([&] {
    (void)engine.execute(engine.make_context("S.busy", "k"), [&] {
      started.count_down();
      finish.wait();
      return 1;
    }, idem::json_codec{});
  });
  started.wait();
  auto busy = engine.execute(engine.make_context("S.busy", "k", {.wait = 0ms}), [] { return 2; }, idem::json_codec{});
  CHECK(busy.is_in_flight());
  CHECK_FALSE(busy.has_value());
  CHECK(busy.retry_after() > 0ms);
  CHECK_THROWS_AS(busy.value(), idem::in_flight_error);
  finish.count_down();
}

TEST_CASE("engine/once: a call returns while its own heartbeat extend is stuck in the store",
          "[engine][heartbeat][concurrency]") {
  faulty_store store;
  std::latch extend_entered(1);
  std::latch unblock(1);
  std::atomic<bool> first = true;
  store.before_extend = [&](const idem::identity&) {
    if (first.exchange(false)) {
      extend_entered.count_down();
      unblock.wait();  // a frozen server: no answer until the test says so
    }
    return true;
  };
  idem::engine engine(store);
  std::promise<bool> returned;
  auto done = returned.get_future();
  std::jthread caller([&] {
    auto o = engine.execute(engine.make_context("S.m", "k", {.lease = 20ms}), [&] { extend_entered.wait(); });
    returned.set_value(o.ran());
  });
  // The call ends (complete, then cancel its heartbeat) although the extend has not returned.
  const bool finished = done.wait_for(10s) == std::future_status::ready;
  unblock.count_down();
  REQUIRE(finished);
  CHECK(done.get());
  CHECK(replays(engine, "S.m", "k"));
}
