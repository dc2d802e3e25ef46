// How the engine takes part in the caller's transaction (a test transaction over a real memory_store).
#include <catch2/catch.hpp>

#include <idem/idem.hpp>

#include "engine_support.hpp"

using namespace std::chrono_literals;
using idem::test::recording_listener;
using idem::test::test_transaction;

TEST_CASE("engine/transaction: an autonomous completion waits for the commit", "[engine][transaction]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  int runs = 0;
  {
    test_transaction tx;
    auto o = engine.execute(engine.make_context("S.m", "k"), [&] { ++runs; });
    CHECK(std::holds_alternative<idem::executed<void>>(o));
    // Not complete yet: a zero-wait duplicate sees the record in flight, and no terminal fired.
    CHECK(std::holds_alternative<idem::in_flight>(engine.execute(engine.make_context("S.m", "k", {.wait = 0ms}), [&] { ++runs; })));
    CHECK(listener->events() == std::vector<std::string>{"acquired", "in_flight"});
    tx.commit();
  }
  CHECK(listener->events() == std::vector<std::string>{"acquired", "in_flight", "completed"});
  CHECK(std::holds_alternative<idem::replayed<void>>(engine.execute(engine.make_context("S.m", "k"), [&] { ++runs; })));
  CHECK(runs == 1);
}

TEST_CASE("engine/transaction: a rollback frees the key and fires failed{rollback}", "[engine][transaction]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  int runs = 0;
  {
    test_transaction tx;
    (void)engine.execute(engine.make_context("S.m", "k"), [&] { ++runs; });
    tx.rollback();
  }
  CHECK(listener->events() == std::vector<std::string>{"acquired", "failed:rollback"});
  CHECK_THROWS_AS(std::rethrow_exception(listener->last_cause()), idem::rollback_error);
  CHECK(std::holds_alternative<idem::executed<void>>(engine.execute(engine.make_context("S.m", "k"), [&] { ++runs; })));
  CHECK(runs == 2);
}

TEST_CASE("engine/transaction: a transaction destroyed without commit counts as a rollback", "[engine][transaction]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  {
    test_transaction tx;
    (void)engine.execute(engine.make_context("S.m", "k"), [] {});
  }
  CHECK(listener->events() == std::vector<std::string>{"acquired", "failed:rollback"});
}

TEST_CASE("engine/transaction: an action that throws inside a transaction releases at once", "[engine][transaction]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  test_transaction tx;
  CHECK_THROWS_AS(engine.execute(engine.make_context("S.m", "k"), [] { throw std::logic_error("x"); }), std::logic_error);
  CHECK(listener->events() == std::vector<std::string>{"acquired", "failed:action"});
  tx.commit();
  // Exactly one terminal: the commit adds nothing.
  CHECK(listener->events() == std::vector<std::string>{"acquired", "failed:action"});
  CHECK(store.size() == 0);
}

TEST_CASE("engine/transaction: join-transaction is refused before acquiring on a store that cannot", "[engine][transaction]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  test_transaction tx;
  const auto ctx = engine.make_context("S.m", "k", {.completion = idem::completion_mode::join_transaction});
  int runs = 0;
  CHECK_THROWS_WITH(engine.execute(ctx, [&] { ++runs; }), Catch::Contains("memory_store") && Catch::Contains("S.m/#"));
  CHECK(runs == 0);
  CHECK(listener->events().empty());
  CHECK(store.size() == 0);
}

TEST_CASE("engine/transaction: an inactive bound transaction is no transaction", "[engine][transaction]") {
  idem::memory_store store;
  auto listener = std::make_shared<recording_listener>();
  idem::engine engine(store, {}, {.listeners = {listener}});
  test_transaction tx;
  tx.commit();  // ended: the next call completes on its own, at once
  (void)engine.execute(engine.make_context("S.m", "k"), [] {});
  CHECK(listener->events() == std::vector<std::string>{"acquired", "completed"});
}
