// tests/postgres/postgres_engine_test.cpp — the engine with postgres_store and
// postgres_transaction: business rows and idempotency records commit or roll back together.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <idem/engine.hpp>
#include <idem/postgres_store.hpp>
#include <idem/postgres_transaction.hpp>
#include <string>
#include <variant>

#include <idem/testing/store_contract.hpp>
#include "postgres_test_support.hpp"
#include "support/faulty_store.hpp"

namespace {

using namespace std::chrono_literals;
using idem::contract::unique_key;
using idem::pg_test::private_schema;
using idem::pg_test::raw_connection;

// A private schema with an orders table, a store on it and the caller's own connection.
struct order_fixture {
  order_fixture()
      : schema("engine_orders"),
        store([&] {
          auto o = idem::pg_test::store_options();
          o.conninfo = schema.conninfo();
          return o;
        }()),
        conn(schema.conninfo()) {
    conn.query("CREATE TABLE orders (id text PRIMARY KEY)");
  }

  void insert_order(const std::string& id) { conn.query("INSERT INTO orders (id) VALUES ($1)", {id}); }
  std::string orders(const std::string& id) { return conn.scalar("SELECT count(*) FROM orders WHERE id = $1", {id}); }
  std::string records(const idem::identity& id) {
    return conn.scalar(
        "SELECT count(*) FROM idem_records WHERE scope = $1 AND key_digest = sha256(convert_to($2, 'UTF8'))",
        {id.scope(), id.key()});
  }
  std::string status(const idem::identity& id) {
    return conn.scalar(
        "SELECT coalesce(max(status), 'absent') FROM idem_records WHERE scope = $1 AND key_digest = "
        "sha256(convert_to($2, 'UTF8'))",
        {id.scope(), id.key()});
  }

  private_schema schema;
  idem::postgres_store store;
  raw_connection conn;
};

const idem::call_options joined{.completion = idem::completion_mode::join_transaction};

}  // namespace

TEST_CASE("engine: join-transaction commits the business row and the record together", "[postgres][engine]") {
  order_fixture f;
  idem::engine engine{f.store};
  const std::string order = unique_key("order");
  const auto ctx = engine.make_context("Orders.place", order, joined);
  int runs = 0;
  {
    idem::postgres_transaction tx{f.conn.get()};
    const auto o = engine.execute(ctx, [&] {
      ++runs;
      f.insert_order(order);
    });
    CHECK(std::holds_alternative<idem::executed<void>>(o));
    CHECK(f.status(ctx.id) == "complete");  // on the transaction's own connection
    raw_connection other{f.schema.conninfo()};
    CHECK(other.scalar("SELECT status FROM idem_records WHERE scope = $1", {ctx.id.scope()}) == "in_progress");
    tx.commit();
  }
  CHECK(f.orders(order) == "1");
  CHECK(f.status(ctx.id) == "complete");
  {
    idem::postgres_transaction tx{f.conn.get()};
    CHECK(std::holds_alternative<idem::replayed<void>>(engine.execute(ctx, [&] { ++runs; })));
    tx.commit();
  }
  CHECK(runs == 1);
}

// The store checks once per transaction that the caller's connection reaches its table (the engine
// asks before acquiring; complete_in_transaction asks again): a first call costs that check, the
// claim and the completion.
TEST_CASE("engine: a join-transaction call checks the caller's connection once per transaction", "[postgres][engine]") {
  order_fixture f;
  idem::engine engine{f.store};
  auto call = [&](const std::string& order) {
    const auto ctx = engine.make_context("Orders.place", order, joined);
    idem::postgres_transaction tx{f.conn.get()};
    const auto before = f.store.statistics().round_trips;
    const auto o = engine.execute(ctx, [&] { f.insert_order(order); });
    const auto spent = f.store.statistics().round_trips - before;
    tx.commit();
    CHECK(std::holds_alternative<idem::executed<void>>(o));
    return spent;
  };
  (void)call(unique_key("warm"));  // prepares the statements on the connections
  CHECK(call(unique_key("order")) == 3);  // identity check, claim, completion
}

TEST_CASE("engine: join-transaction rolled back leaves neither the row nor the record, and a redelivery runs once",
          "[postgres][engine]") {
  order_fixture f;
  idem::engine engine{f.store};
  const std::string order = unique_key("order");
  const auto ctx = engine.make_context("Orders.place", order, joined);
  int runs = 0;
  {
    idem::postgres_transaction tx{f.conn.get()};
    (void)engine.execute(ctx, [&] {
      ++runs;
      f.insert_order(order);
    });
    // "crash" before the commit: the transaction rolls back in its destructor
  }
  CHECK(f.orders(order) == "0");
  CHECK(f.records(ctx.id) == "0");  // released after the rollback

  for (int delivery = 0; delivery < 2; ++delivery) {
    idem::postgres_transaction tx{f.conn.get()};
    (void)engine.execute(ctx, [&] {
      ++runs;
      f.insert_order(order);
    });
    tx.commit();
  }
  CHECK(runs == 2);
  CHECK(f.orders(order) == "1");
  CHECK(f.status(ctx.id) == "complete");
}

TEST_CASE("engine: an autonomous completion under a postgres_transaction is written after the commit",
          "[postgres][engine]") {
  order_fixture f;
  idem::engine engine{f.store};
  const std::string order = unique_key("order");
  const auto ctx = engine.make_context("Orders.place", order);
  int runs = 0;
  {
    idem::postgres_transaction tx{f.conn.get()};
    CHECK(std::holds_alternative<idem::executed<void>>(engine.execute(ctx, [&] {
      ++runs;
      f.insert_order(order);
    })));
    CHECK(std::holds_alternative<idem::in_flight>(
        engine.execute(engine.make_context("Orders.place", order, {.wait = 0ms}), [&] { ++runs; })));
    tx.commit();
  }
  CHECK(f.status(ctx.id) == "complete");
  CHECK(std::holds_alternative<idem::replayed<void>>(engine.execute(ctx, [&] { ++runs; })));
  CHECK(runs == 1);
}

TEST_CASE("engine: an autonomous completion rolled back frees the key", "[postgres][engine]") {
  order_fixture f;
  idem::engine engine{f.store};
  const std::string order = unique_key("order");
  const auto ctx = engine.make_context("Orders.place", order);
  {
    idem::postgres_transaction tx{f.conn.get()};
    (void)engine.execute(ctx, [&] { f.insert_order(order); });
    tx.rollback();
  }
  CHECK(f.records(ctx.id) == "0");
  CHECK(std::holds_alternative<idem::executed<void>>(engine.execute(ctx, [] {})));
}

TEST_CASE("engine: join-transaction without a transaction is refused before anything is acquired",
          "[postgres][engine]") {
  order_fixture f;
  idem::engine engine{f.store};
  const auto ctx = engine.make_context("Orders.place", unique_key("order"), joined);
  int runs = 0;
  CHECK_THROWS_AS(engine.execute(ctx, [&] { ++runs; }), idem::configuration_error);
  CHECK(runs == 0);
  CHECK(f.records(ctx.id) == "0");
}

TEST_CASE("engine: a postgres_transaction that ends inside the action: completed after a commit, released after a "
          "rollback",
          "[postgres][engine]") {
  order_fixture f;
  idem::engine engine{f.store};
  const bool join = GENERATE(false, true);
  INFO((join ? "join-transaction" : "autonomous"));
  const idem::call_options options = join ? joined : idem::call_options{};
  {
    const std::string order = unique_key("inside-commit");
    const auto ctx = engine.make_context("Orders.place", order, options);
    idem::postgres_transaction tx{f.conn.get()};
    const auto o = engine.execute(ctx, [&] {
      f.insert_order(order);
      tx.commit();
    });
    CHECK(std::holds_alternative<idem::executed<void>>(o));
    CHECK(f.status(ctx.id) == "complete");  // not left in progress for a redelivery to run again
    CHECK(f.orders(order) == "1");
  }
  {
    const std::string order = unique_key("inside-rollback");
    const auto ctx = engine.make_context("Orders.place", order, options);
    idem::postgres_transaction tx{f.conn.get()};
    (void)engine.execute(ctx, [&] {
      f.insert_order(order);
      tx.rollback();
    });
    CHECK(f.status(ctx.id) == "absent");  // released at once: a redelivery may run it
    CHECK(f.orders(order) == "0");
  }
}

TEST_CASE("engine: a holder paused past its lease cannot commit its business rows after another caller completed "
          "the record",
          "[postgres][engine]") {
  order_fixture f;
  std::atomic<bool> paused = false;
  idem::test::faulty_store holder_view{f.store};
  holder_view.before_extend = [&](const idem::identity&) { return !paused.load(); };  // no heartbeat while paused
  idem::engine holder{holder_view};
  const std::string order = unique_key("paused");
  const auto ctx = holder.make_context("Orders.place", order, {.lease = 100ms});
  {
    idem::postgres_transaction tx{f.conn.get()};
    CHECK(std::holds_alternative<idem::executed<void>>(holder.execute(ctx, [] {})));
    paused = true;
    std::this_thread::sleep_for(250ms);  // the lease expires while the holder's transaction is open
    idem::context steal = ctx;
    steal.wait = 0ms;
    const auto thief = idem::contract::require_acquired(f.store.try_acquire(steal));
    f.store.complete(ctx.id, thief, idem::contract::sample_payload("second worker"), 1h);
    paused = false;
    f.insert_order(order);
    CHECK_THROWS_AS(tx.commit(), idem::lease_lost_error);
  }
  CHECK(f.orders(order) == "0");  // the first worker's row went with the refused commit
  idem::context look = ctx;
  look.wait = 0ms;
  CHECK(idem::contract::require_duplicate(f.store.try_acquire(look)).value ==
        idem::contract::sample_payload("second worker"));
}
