// End to end: annotated code built through idem_generate, run against the memory store.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include <idem/idem.hpp>
#include <idem/policy_registry.hpp>

#include "order_listener.idem.hpp"

namespace {

using namespace std::chrono_literals;

// Holds the first execution of an action open until released; bounded waits only. Runs on the
// worker thread, so it records instead of asserting (Catch2 assertions belong to the test thread).
struct gate {
  std::promise<void> entered;
  std::promise<void> released;
  std::shared_future<void> release = released.get_future().share();
  std::atomic<bool> first{true};
  std::atomic<bool> timed_out{false};

  std::function<void()> hook() {
    return [this] {
      if (!first.exchange(false)) return;
      entered.set_value();
      if (release.wait_for(10s) != std::future_status::ready) timed_out = true;
    };
  }
};

}  // namespace

TEST_CASE("a duplicate delivery is skipped", "[annotator][e2e]") {
  idem::memory_store store;
  idem::engine engine{store};
  idem::guarded<shop::OrderListener> listener{engine};
  listener.on({"order-1", 10});
  listener.on({"order-1", 10});
  listener.on({"order-2", 20});
  CHECK(listener.handled == 2);
}

TEST_CASE("a value-returning function replays its first result through the codec", "[annotator][e2e]") {
  idem::memory_store store;
  idem::engine engine{store};
  idem::guarded<shop::OrderListener> listener{engine};
  const shop::Receipt first = listener.settle({"alice", "o-1"});
  const shop::Receipt again = listener.settle({"alice", "o-1"});
  CHECK(first.run == 1);
  CHECK(again.run == 1);
  CHECK(again.text == "settled o-1 for alice");
  CHECK(listener.settled == 1);
  CHECK(listener.settle({"bob", "o-1"}).run == 2);
}

TEST_CASE("virtual dispatch through a base reference is guarded", "[annotator][e2e]") {
  idem::memory_store store;
  idem::engine engine{store};
  idem::guarded<shop::OrderListener> listener{engine};
  shop::OrderListener& base = listener;
  base.on({"order-9", 1});
  base.on({"order-9", 1});
  CHECK(listener.handled == 1);
  CHECK(base.settle({"carol", "o-2"}).run == base.settle({"carol", "o-2"}).run);
}

TEST_CASE("a concurrent duplicate with waitTimeout PT0S gets in_flight_error", "[annotator][e2e][concurrency]") {
  idem::memory_store store;
  idem::engine engine{store};
  idem::guarded<shop::OrderListener> listener{engine};
  gate g;
  listener.during_action = g.hook();
  auto first = std::async(std::launch::async, [&] { listener.on({"order-5", 1}); });
  REQUIRE(g.entered.get_future().wait_for(10s) == std::future_status::ready);
  bool declined = false;
  try {
    listener.on({"order-5", 1});
  } catch (const idem::in_flight_error& e) {
    declined = true;
    CHECK(e.retry_after() > 0ms);
  }
  g.released.set_value();
  first.get();
  CHECK_FALSE(g.timed_out);
  CHECK(declined);
  CHECK(listener.handled == 1);
}

TEST_CASE("a concurrent duplicate that may wait gets the first result", "[annotator][e2e][concurrency]") {
  idem::memory_store store;
  idem::engine engine{store};
  idem::guarded<shop::OrderListener> listener{engine};
  gate g;
  listener.during_action = g.hook();
  auto first = std::async(std::launch::async, [&] { return listener.settle({"dave", "o-3"}); });
  REQUIRE(g.entered.get_future().wait_for(10s) == std::future_status::ready);
  auto second = std::async(std::launch::async, [&] { return listener.settle({"dave", "o-3"}); });
  // The second caller is parked inside the store; it cannot finish before the first does.
  CHECK(second.wait_for(50ms) == std::future_status::timeout);
  g.released.set_value();
  CHECK(first.get().run == 1);
  CHECK_FALSE(g.timed_out);
  CHECK(second.get().run == 1);
  CHECK(listener.settled == 1);
}

TEST_CASE("invoke guards a free function and a member on a plain object", "[annotator][e2e]") {
  idem::memory_store store;
  idem::engine engine{store};
  const int before = index_rebuilds;
  idem::invoke<&rebuild_index>(engine, Job{7});
  idem::invoke<&rebuild_index>(engine, Job{7});
  CHECK(index_rebuilds == before + 1);

  shop::OrderListener plain;
  idem::invoke<&shop::OrderListener::on>(engine, plain, shop::OrderPlaced{"order-3", 1});
  idem::invoke<&shop::OrderListener::on>(engine, plain, shop::OrderPlaced{"order-3", 1});
  CHECK(plain.handled == 1);
}

TEST_CASE("generated code registers every policy for the engine's startup check", "[annotator][e2e]") {
  const auto policies = idem::detail::registered_policies();
  auto find = [&](std::string_view function) {
    for (const auto& p : policies)
      if (p.function == function) return &p;
    return static_cast<const idem::detail::policy_info*>(nullptr);
  };
  const auto* on = find("shop::OrderListener::on");
  REQUIRE(on != nullptr);
  CHECK(on->scope == "OrderListener.on");
  CHECK_FALSE(on->scope_explicit);
  CHECK(on->options.wait == 0ms);
  CHECK(on->line > 0);
  CHECK(on->codec.empty());
  CHECK(on->result_type == "void");
  const auto* settle = find("shop::OrderListener::settle");
  REQUIRE(settle != nullptr);
  CHECK(settle->codec == "idem::json_codec");
  CHECK(settle->result_type == "shop::Receipt");
  const auto* rebuild = find("rebuild_index");
  REQUIRE(rebuild != nullptr);
  CHECK(rebuild->scope == "rebuild_index");  // scope = "" is the default scope
  CHECK_FALSE(rebuild->scope_explicit);
  CHECK(rebuild->options.lease == std::chrono::milliseconds(5min));
  CHECK_FALSE(rebuild->options.ttl.has_value());
  CHECK_FALSE(rebuild->options.completion.has_value());
}
