// The engine over a real memory_store: outcomes, lifecycle, failure handling, configuration.
#include <catch2/catch.hpp>

#include <atomic>
#include <latch>
#include <thread>

#include <idem/idem.hpp>
#include <idem/policy_registry.hpp>

#include "engine_support.hpp"
#include "support/eventually.hpp"

using namespace std::chrono_literals;
using idem::test::recording_listener;
using idem::test::recording_log;

namespace {

struct receipt {
  std::string id;
  int cents = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(receipt, id, cents)
};

struct action_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct failing_codec {
  idem::payload encode(const receipt&) const { throw std::runtime_error("codec is broken"); }
  receipt decode(const idem::payload&) const { return {}; }
};

}  // namespace

TEST_CASE("engine: the first call executes and a duplicate replays the decoded value", "[engine]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  int runs = 0;
  const auto ctx = engine.make_context("Billing.settle", "order-1");

  auto first = engine.execute<receipt>(ctx, [&] { ++runs; return receipt{"r-1", 1250}; }, idem::json_codec{});
  REQUIRE(std::holds_alternative<idem::executed<receipt>>(first));
  CHECK(std::get<idem::executed<receipt>>(first).value.cents == 1250);

  auto second = engine.execute<receipt>(ctx, [&] { ++runs; return receipt{"r-2", 99}; }, idem::json_codec{});
  REQUIRE(std::holds_alternative<idem::replayed<receipt>>(second));
  const auto& replay = std::get<idem::replayed<receipt>>(second);
  CHECK(replay.value.id == "r-1");
  CHECK(replay.value.cents == 1250);
  CHECK(replay.completed_at <= std::chrono::system_clock::now());
  CHECK(runs == 1);
  CHECK(listener->events() == std::vector<std::string>{"acquired", "completed", "duplicate"});
  const auto tokens = listener->tokens();
  CHECK(tokens[0] == tokens[1]);
}

TEST_CASE("engine: a void action runs once per key and scopes are independent", "[engine]") {
  idem::memory_store store;
  idem::engine engine(store);
  int runs = 0;
  auto call = [&](const char* scope, const char* key) {
    return engine.execute(engine.make_context(scope, key), [&] { ++runs; });
  };
  CHECK(std::holds_alternative<idem::executed<void>>(call("A.on", "k")));
  CHECK(std::holds_alternative<idem::replayed<void>>(call("A.on", "k")));
  CHECK(std::holds_alternative<idem::executed<void>>(call("B.on", "k")));
  CHECK(std::holds_alternative<idem::executed<void>>(call("A.on", "k2")));
  CHECK(runs == 3);
}

TEST_CASE("engine: an action that throws releases the record and its exception propagates unchanged", "[engine]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  const auto ctx = engine.make_context("Orders.on", "o-7");
  CHECK_THROWS_AS(engine.execute(ctx, [] { throw action_failed("boom"); }), action_failed);
  CHECK(listener->events() == std::vector<std::string>{"acquired", "failed:action"});
  CHECK_THROWS_AS(std::rethrow_exception(listener->last_cause()), action_failed);

  // Released, so the retry runs the action.
  int runs = 0;
  CHECK(std::holds_alternative<idem::executed<void>>(engine.execute(ctx, [&] { ++runs; })));
  CHECK(runs == 1);
  CHECK(store.size() == 1);
}

TEST_CASE("engine: a completion failure is not released and propagates by default", "[engine]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  auto ctx = engine.make_context("Billing.settle", "o-8", {.wait = 0ms});
  int runs = 0;
  CHECK_THROWS_WITH(engine.execute<receipt>(ctx, [&] { ++runs; return receipt{}; }, failing_codec{}),
                    "codec is broken");
  CHECK(listener->events() == std::vector<std::string>{"acquired", "failed:completion"});
  // Still in progress: the work happened, so a duplicate must not run it again while the lease lives.
  auto again = engine.execute<receipt>(ctx, [&] { ++runs; return receipt{}; }, idem::json_codec{});
  CHECK(std::holds_alternative<idem::in_flight>(again));
  CHECK(runs == 1);
}

TEST_CASE("engine: log_and_return reports a completion failure and returns the result", "[engine]") {
  idem::memory_store store;
  recording_log log;
  idem::config settings;
  settings.failure_policy = idem::completion_failure_policy::log_and_return;
  idem::engine engine(store, settings, {.log = log.sink()});
  const std::string secret = "card-4111111111111111";
  const auto ctx = engine.make_context("Billing.settle", secret);
  auto result = engine.execute<receipt>(ctx, [] { return receipt{"r", 5}; }, failing_codec{});
  REQUIRE(std::holds_alternative<idem::executed<receipt>>(result));
  CHECK(std::get<idem::executed<receipt>>(result).value.cents == 5);
  const auto records = log.get();
  REQUIRE(records.size() == 1);
  CHECK(records[0].level == idem::log_level::error);
  CHECK_THAT(records[0].message, Catch::Contains(ctx.id.to_string()) && Catch::Contains("codec is broken"));
  CHECK(records[0].message.find(secret) == std::string::npos);
}

TEST_CASE("engine: a listener that throws is logged and ignored", "[engine]") {
  struct throwing_listener : idem::lifecycle_listener {
    void on_acquired(const idem::context&, const idem::lease_token&) override { throw std::runtime_error("listener bug"); }
  };
  idem::memory_store store;
  recording_log log;
  auto after = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {std::make_shared<throwing_listener>(), after}, .log = log.sink()});
  int runs = 0;
  auto result = engine.execute(engine.make_context("S.m", "k"), [&] { ++runs; });
  CHECK(std::holds_alternative<idem::executed<void>>(result));
  CHECK(runs == 1);
  CHECK(after->events() == std::vector<std::string>{"acquired", "completed"});
  const auto records = log.get();
  REQUIRE(records.size() == 1);
  CHECK_THAT(records[0].message, Catch::Contains("on_acquired") && Catch::Contains("listener bug"));
}

TEST_CASE("engine: a duplicate arriving mid-flight waits and gets the result, or is told in flight", "[engine][concurrency]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  std::latch started(1), release(1);
  std::atomic<int> runs = 0;
  std::jthread holder([&] {
    (void)engine.execute(engine.make_context("S.m", "k"), [&] {
      ++runs;
      started.count_down();
      release.wait();
    });
  });
  started.wait();

  // Zero wait: looks once and answers in flight with the holder's remaining lease.
  auto now = engine.execute(engine.make_context("S.m", "k", {.wait = 0ms}), [&] { ++runs; });
  REQUIRE(std::holds_alternative<idem::in_flight>(now));
  CHECK(std::get<idem::in_flight>(now).retry_after > 20s);
  CHECK(std::get<idem::in_flight>(now).retry_after <= 30s);

  // A waiting duplicate blocks inside the store until the holder completes: the holder is let go
  // only once the store counts the duplicate as waiting, so the replay really comes from the wait.
  // Catch2 assertions are not thread-safe: threads record, the test thread asserts.
  std::atomic<bool> waiter_replayed = false;
  std::jthread waiter([&] {
    auto o = engine.execute(engine.make_context("S.m", "k", {.wait = 10s}), [&] { ++runs; });
    waiter_replayed = std::holds_alternative<idem::replayed<void>>(o);
  });
  const bool waiter_blocked = idem::test::eventually([&] { return store.waiting() == 1; }, 10s);
  release.count_down();
  REQUIRE(waiter_blocked);
  holder.join();
  waiter.join();
  CHECK(waiter_replayed);
  CHECK(runs == 1);
}

TEST_CASE("engine: many concurrent callers of one key run the action exactly once", "[engine][concurrency]") {
  idem::memory_store store;
  idem::engine engine(store);
  std::atomic<int> runs = 0, replays = 0, wrong_value = 0;
  std::latch go(16);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < 16; ++i)
      threads.emplace_back([&] {
        go.arrive_and_wait();
        auto o = engine.execute<receipt>(engine.make_context("S.m", "same"),
                                         [&] { ++runs; return receipt{"only", 1}; }, idem::json_codec{});
        if (auto* r = std::get_if<idem::replayed<receipt>>(&o)) {
          ++replays;
          if (r->value.id != "only") ++wrong_value;
        }
      });
  }
  CHECK(runs == 1);
  CHECK(replays == 15);
  CHECK(wrong_value == 0);
}

TEST_CASE("engine: the default outcome mapper throws in_flight_error without the key", "[engine]") {
  idem::memory_store store;
  idem::engine engine(store);
  const std::string secret = "user@example.com";
  const auto ctx = engine.make_context("S.m", secret);
  try {
    idem::map_in_flight(engine, ctx, idem::in_flight{1500ms});
    FAIL("expected in_flight_error");
  } catch (const idem::in_flight_error& e) {
    CHECK(e.retry_after() == 1500ms);
    CHECK_THAT(std::string(e.what()), Catch::Contains(ctx.id.to_string()));
    CHECK(std::string(e.what()).find(secret) == std::string::npos);
  }
}

TEST_CASE("engine: a custom outcome mapper decides the in-flight answer", "[engine]") {
  idem::memory_store store;
  std::chrono::milliseconds seen{-1};
  idem::engine engine(store, {}, {.map_in_flight = [&](const idem::context&, const idem::in_flight& f) { seen = f.retry_after; }});
  CHECK_NOTHROW(idem::map_in_flight(engine, engine.make_context("S.m", "k"), idem::in_flight{42ms}));
  CHECK(seen == 42ms);
}

TEST_CASE("engine: a fingerprint mismatch throws with both fingerprints and fires nothing", "[engine]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  (void)engine.execute(engine.make_context("S.m", "k", {}, std::string(64, 'a')), [] {});
  try {
    (void)engine.execute(engine.make_context("S.m", "k", {}, std::string(64, 'b')), [] {});
    FAIL("expected fingerprint_mismatch_error");
  } catch (const idem::fingerprint_mismatch_error& e) {
    CHECK(e.stored() == std::string(64, 'a'));
    CHECK(e.received() == std::string(64, 'b'));
  }
  CHECK(listener->events() == std::vector<std::string>{"acquired", "completed"});
}

TEST_CASE("engine: bad configuration fails at construction, not on the first call", "[engine]") {
  idem::memory_store store;
  idem::config bad;
  bad.default_lease = 1ms;
  CHECK_THROWS_AS(idem::engine(store, bad), idem::configuration_error);
  idem::config joined;
  joined.default_completion = idem::completion_mode::join_transaction;
  CHECK_THROWS_WITH(idem::engine(store, joined), Catch::Contains("memory_store") && Catch::Contains("autonomous"));
  CHECK_THROWS_AS(idem::engine(store, {}, {.listeners = {nullptr}}), idem::configuration_error);
}

TEST_CASE("engine: make_context fills defaults and rejects bad input", "[engine]") {
  idem::memory_store store;
  idem::config settings;
  settings.default_wait = 0ms;
  idem::engine engine(store, settings);
  const auto ctx = engine.make_context("S.m", "k", {.ttl = 1h});
  CHECK(ctx.ttl == 1h);
  CHECK(ctx.lease == 30s);
  CHECK(ctx.wait == 0ms);
  CHECK_THROWS_AS(engine.make_context("S.m", ""), idem::invalid_key_error);
  CHECK_THROWS_AS(engine.make_context("S:m", "k"), idem::configuration_error);
  CHECK_THROWS_AS(engine.make_context("S.m", "k", {.lease = 1ms}), idem::configuration_error);
}

TEST_CASE("engine: functions of different headers sharing a scope must agree on its settings", "[engine]") {
  using idem::detail::policy_info;
  // B names A's scope on purpose (without that, coinciding scopes are refused whatever the settings).
  const policy_info a{.function = "A::on", .scope = "Startup.shared", .options = {.ttl = std::chrono::hours(1)},
                      .file = "a.hpp", .line = 3, .column = 5};
  policy_info b = a;
  b.function = "B::on";
  b.scope_explicit = true;
  b.file = "b.hpp";
  b.line = 7;
  CHECK_NOTHROW(idem::detail::check_shared_scopes({a, b}));  // same settings: one unit of work, two entry points
  b.options.ttl = std::chrono::hours(2);
  CHECK_THROWS_WITH(idem::detail::check_shared_scopes({a, b}), Catch::Contains("Startup.shared") &&
                                                                  Catch::Contains("'A::on' (a.hpp:3:5)") &&
                                                                  Catch::Contains("'B::on' (b.hpp:7:5)") &&
                                                                  Catch::Contains("ttl \"PT2H\" vs \"PT1H\""));
  b.scope = "Startup.other";
  CHECK_NOTHROW(idem::detail::check_shared_scopes({a, b}));
}
