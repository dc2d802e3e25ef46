// testing/transactional_contract.cpp — the extra behaviour of a store that can complete a
// record inside a caller's transaction (store::supports_transactional_completion()).
//
// A port of idempotency4j's TransactionalStoreContract, 0.5 version (the "ref N" comments give its
// numbering in shared/reference/idempotency4j.md §5.2). Each case takes a harness from
// make_transactional_harness(): a store whose complete_in_transaction writes on the connection of
// the transactions the harness opens, everything else on the store's own connections. A store
// that passes these cases also runs the plain contract (store_contract.cpp).
#include <idem/testing/store_contract.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <variant>

#include <catch2/catch.hpp>

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using idem::contract::describe;
using idem::contract::fresh_identity;
using idem::contract::make_transactional_harness;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::require_in_flight;
using idem::contract::sample_payload;
using idem::contract::stopwatch;
using idem::contract::transactional_scope;

// The reference's fixture: ttl 1 h, lease 30 s, wait 5 s (or as given), no fingerprint.
idem::context tx_context(const idem::identity& id, milliseconds wait = 5s) {
  idem::context ctx{.id = id, .ttl = 1h, .lease = 30s, .wait = wait};
  ctx.validate();
  return ctx;
}

idem::identity tx_identity(std::string_view hint) { return fresh_identity(hint, transactional_scope); }

}  // namespace

// ref 1
TEST_CASE("transactional: the store reports that it can complete inside a transaction", "[transactional]") {
  auto harness = make_transactional_harness();
  CHECK(harness->store().supports_transactional_completion());
}

// ref 2
TEST_CASE("transactional: a completion committed with its transaction is replayed", "[transactional]") {
  auto harness = make_transactional_harness();
  idem::store& store = harness->store();
  const auto id = tx_identity("commit");
  const auto token = require_acquired(store.try_acquire(tx_context(id)));

  auto tx = harness->begin();
  store.complete_in_transaction(id, token, sample_payload(), 1h, tx->get());
  tx->commit();

  CHECK(require_duplicate(store.try_acquire(tx_context(id))).value == sample_payload());
}

// ref 3
TEST_CASE("transactional: a completion rolled back with its transaction leaves the record in progress",
          "[transactional]") {
  auto harness = make_transactional_harness();
  idem::store& store = harness->store();
  const auto id = tx_identity("rollback");
  const auto token = require_acquired(store.try_acquire(tx_context(id)));

  auto tx = harness->begin();
  store.complete_in_transaction(id, token, sample_payload(), 1h, tx->get());
  tx->rollback();

  // Neither absent (that would be acquired) nor complete (duplicate): still held.
  require_in_flight(store.try_acquire(tx_context(id, 0ms)));
}

// ref 4
TEST_CASE("transactional: a record released after a rollback can be acquired again", "[transactional]") {
  auto harness = make_transactional_harness();
  idem::store& store = harness->store();
  const auto id = tx_identity("rollback-release");
  const auto token = require_acquired(store.try_acquire(tx_context(id)));

  auto tx = harness->begin();
  store.complete_in_transaction(id, token, sample_payload(), 1h, tx->get());
  tx->rollback();
  store.release(id, token);

  const auto again = require_acquired(store.try_acquire(tx_context(id, 0ms)));
  CHECK(again != token);
}

// ref 5
TEST_CASE("transactional: a plain completion while a transaction is open is visible at once", "[transactional]") {
  auto harness = make_transactional_harness();
  idem::store& store = harness->store();
  const auto id = tx_identity("plain-while-open");
  const auto token = require_acquired(store.try_acquire(tx_context(id)));

  auto tx = harness->begin();
  store.complete(id, token, sample_payload(), 1h);
  CHECK(require_duplicate(store.try_acquire(tx_context(id, 0ms))).value == sample_payload());
  tx->commit();
}

// ref 6
TEST_CASE("transactional: a plain completion survives the rollback of an open transaction", "[transactional]") {
  auto harness = make_transactional_harness();
  idem::store& store = harness->store();
  const auto id = tx_identity("plain-survives-rollback");
  const auto token = require_acquired(store.try_acquire(tx_context(id)));

  auto tx = harness->begin();
  store.complete(id, token, sample_payload(), 1h);
  tx->rollback();

  CHECK(require_duplicate(store.try_acquire(tx_context(id, 0ms))).value == sample_payload());
}

// ref 7
TEST_CASE("transactional: a completion inside an open transaction is not visible to other callers",
          "[transactional][concurrency]") {
  auto harness = make_transactional_harness();
  idem::store& store = harness->store();
  const auto id = tx_identity("invisible-before-commit");
  const auto token = require_acquired(store.try_acquire(tx_context(id)));

  // Declared before the transaction, so that an early failure rolls the transaction back before
  // the other caller is joined.
  std::optional<idem::contract::background<idem::acquire_result>> other;
  auto tx = harness->begin();
  store.complete_in_transaction(id, token, sample_payload(), 1h, tx->get());
  other.emplace([&] { return store.try_acquire(tx_context(id, 5s)); });

  // Within half a second the other caller is either still blocked or told something other than
  // duplicate: the uncommitted completion must not leak.
  if (other->finished_within(500ms)) {
    const auto early = other->result();
    INFO("answered before the rollback: " << describe(early));
    CHECK_FALSE(std::holds_alternative<idem::duplicate>(early));
    tx->rollback();
    return;
  }
  tx->rollback();
  REQUIRE(other->finished_within(5s + 10s));
  const auto late = other->result();
  INFO("answered after the rollback: " << describe(late));
  CHECK_FALSE(std::holds_alternative<idem::duplicate>(late));
}

// ref 8
TEST_CASE("transactional: a caller blocked by an open transaction is answered in flight within its wait",
          "[transactional][concurrency]") {
  auto harness = make_transactional_harness();
  idem::store& store = harness->store();
  const auto id = tx_identity("answered-while-locked");
  const auto token = require_acquired(store.try_acquire(tx_context(id)));

  std::optional<idem::contract::background<idem::acquire_result>> other;
  auto tx = harness->begin();
  store.complete_in_transaction(id, token, sample_payload(), 1h, tx->get());

  const stopwatch watch;
  other.emplace([&] { return store.try_acquire(tx_context(id, 1s)); });
  const bool answered = other->finished_within(1s + 5s);
  const milliseconds elapsed = watch.elapsed();
  tx->rollback();

  INFO("waited " << elapsed.count() << " ms for an answer");
  REQUIRE(answered);
  require_in_flight(other->result());
}
