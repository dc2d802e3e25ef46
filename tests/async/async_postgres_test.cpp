// tests/async/async_postgres_test.cpp — idem::async_execute on the PostgreSQL store (the fixture's
// server): statements driven on an event loop through libpq's non-blocking API (the store's own
// thread, or the caller's io_context), a duplicate's wait a registration on the LISTEN
// connection's notifications plus a timer, never a thread parked for the call.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/asio.hpp>
#include <idem/idem.hpp>
#include <idem/postgres_store.hpp>
#include <idem/postgres_transaction.hpp>

#include "burst.hpp"
#include "postgres/postgres_test_support.hpp"
#include "support/eventually.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using idem::test::burst;
using idem::test::burst_result;
using idem::test::eventually;

idem::postgres_store_options options_for(const char* hint, asio::io_context* on_loop = nullptr) {
  idem::pg_test::ensure_schema();
  idem::postgres_store_options o = idem::pg_test::store_options(hint);
  if (on_loop != nullptr) o.event_loop = std::make_shared<idem::asio::event_loop>(*on_loop);
  return o;
}

// 1,000 coroutines on one io_context thread: 500 keys, each called twice at once, the action a
// 50 ms timer. `on_loop`: the store drives its statements on that io_context (options.event_loop).
void burst_on_postgres(bool on_loop) {
  asio::io_context io;
  auto store = std::make_unique<idem::postgres_store>(options_for("burst", on_loop ? &io : nullptr));
  idem::engine engine{*store, idem::test::quiet_config()};
  const std::string scope = "Burst." + idem::pg_test::unique_name("pg");
  // First the pool's connections (opened on the shared blocking pool) and the store's threads
  // (its event loop, the listener): a fixed set, whatever the number of calls.
  const burst_result warm = burst(io, engine, 50, scope + ".warm");
  REQUIRE(warm.executions == 50);
  const burst_result few = burst(io, engine, 5, scope + ".few");
  const burst_result many = burst(io, engine, 500, scope + ".many");
  idem::test::check_burst(few, many, *store,
                          on_loop ? "on PostgreSQL (statements driven on the io_context)" : "on PostgreSQL");
  CHECK(store->statistics().connections_opened <= 8);
}

}  // namespace

TEST_CASE("1,000 coroutines on one thread on PostgreSQL: 500 keys twice at once, each action 50 ms, nothing parked") {
  burst_on_postgres(false);
}

TEST_CASE("1,000 coroutines on PostgreSQL with the store's statements driven on their io_context (event_loop)") {
  burst_on_postgres(true);
}

TEST_CASE("on PostgreSQL, a duplicate cancelled while it waits ends with operation_aborted and changes nothing") {
  for (bool on_loop : {false, true}) {
    asio::io_context io;
    auto store = std::make_unique<idem::postgres_store>(options_for("cancel", on_loop ? &io : nullptr));
    idem::engine engine{*store, idem::test::quiet_config()};
    idem::test::check_cancelled_duplicate(io, engine, *store, "Cancel.postgres", idem::pg_test::unique_name("k"));
  }
}

TEST_CASE("a PostgreSQL store destroyed with a duplicate waiting answers it store_unavailable_error") {
  idem::test::check_destroyed_with_a_waiter(std::make_unique<idem::postgres_store>(options_for("destroyed")),
                                            "Destroyed.postgres." + idem::pg_test::unique_name("s"));
}

TEST_CASE("a PostgreSQL store on the caller's event loop, destroyed with a duplicate waiting, answers it "
          "store_unavailable_error") {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  idem::test::check_destroyed_with_a_waiter(std::make_unique<idem::postgres_store>(options_for("loop-gone", &io)),
                                            "Destroyed.postgres." + idem::pg_test::unique_name("l"));
  work.reset();
  runner.join();
}

TEST_CASE("a PostgreSQL store may be let go of in the completion of its last call, on either event loop") {
  idem::test::check_let_go(
      [](asio::io_context* io) { return std::make_unique<idem::postgres_store>(options_for("let-go", io)); },
      "LetGo.postgres", idem::pg_test::unique_name("k"));
}

namespace {

// A private schema with an orders table, a store on it driving its statements on `io`, and the
// caller's own connection, on which the transactions run.
struct order_fixture {
  explicit order_fixture(asio::io_context& io)
      : schema("async_orders"),
        store([&] {
          auto o = options_for("async-tx", &io);
          o.conninfo = schema.conninfo();
          return o;
        }()),
        conn(schema.conninfo()) {
    conn.query("CREATE TABLE orders (id text PRIMARY KEY)");
  }
  std::string orders(const std::string& id) { return conn.scalar("SELECT count(*) FROM orders WHERE id = $1", {id}); }
  std::string status(const idem::identity& id) {
    return conn.scalar(
        "SELECT coalesce(max(status), 'absent') FROM idem_records WHERE scope = $1 AND key_digest = "
        "sha256(convert_to($2, 'UTF8'))",
        {id.scope(), id.key()});
  }

  idem::pg_test::private_schema schema;
  idem::postgres_store store;
  idem::pg_test::raw_connection conn;
};

}  // namespace

TEST_CASE("on PostgreSQL, an asynchronous join-transaction call writes its record inside the transaction it is given") {
  asio::io_context io;
  order_fixture f(io);
  idem::engine engine{f.store, idem::test::quiet_config()};
  const idem::call_options joined{.completion = idem::completion_mode::join_transaction};
  const std::string kept = idem::pg_test::unique_name("kept");
  const std::string undone = idem::pg_test::unique_name("undone");
  const auto kept_ctx = engine.make_context("Orders.async", kept, joined);
  const auto undone_ctx = engine.make_context("Orders.async", undone, joined);
  int runs = 0;
  std::string inside_tx;
  std::string seen_by_others;
  std::string after_rollback;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        {
          // Begun and committed off this thread (the second transaction is begun and ended on it).
          auto tx = co_await idem::async_begin<idem::postgres_transaction>(f.conn.get(), asio::use_awaitable);
          auto o = co_await idem::async_execute(
              engine, kept_ctx, *tx,
              [&] {
                ++runs;
                f.conn.query("INSERT INTO orders (id) VALUES ($1)", {kept});
                return 1;
              },
              idem::json_codec{}, asio::use_awaitable);
          CHECK(o.ran());
          inside_tx = f.status(kept_ctx.id);  // on the transaction's own connection
          idem::pg_test::raw_connection other{f.schema.conninfo()};
          seen_by_others = other.scalar("SELECT status FROM idem_records WHERE scope = $1 AND status = 'in_progress'",
                                        {kept_ctx.id.scope()});
          co_await idem::async_commit(*tx, asio::use_awaitable);
        }
        {
          idem::postgres_transaction tx{f.conn.get()};
          auto o = co_await idem::async_execute(
              engine, undone_ctx, tx,
              [&] {
                ++runs;
                f.conn.query("INSERT INTO orders (id) VALUES ($1)", {undone});
                return 2;
              },
              idem::json_codec{}, asio::use_awaitable);
          CHECK(o.ran());
          tx.rollback();  // the order and its record go together: the key is free again
        }
        after_rollback = f.status(undone_ctx.id);
      },
      asio::detached);
  io.run();
  CHECK(runs == 2);
  CHECK(inside_tx == "complete");
  CHECK(seen_by_others == "in_progress");  // invisible to others until the commit
  CHECK(f.orders(kept) == "1");
  CHECK(f.status(kept_ctx.id) == "complete");
  CHECK(f.orders(undone) == "0");
  CHECK(after_rollback == "absent");
  // The committed one replays; the rolled-back one runs again.
  auto replay = engine.execute(engine.make_context("Orders.async", kept), [] { return 0; }, idem::json_codec{});
  CHECK(replay.is_replay());
  CHECK(replay.value() == 1);
  auto again = engine.execute(engine.make_context("Orders.async", undone), [] { return 3; }, idem::json_codec{});
  CHECK(again.ran());
}

TEST_CASE("on PostgreSQL, an asynchronous join-transaction call refuses a transaction on another database") {
  asio::io_context io;
  order_fixture f(io);
  idem::engine engine{f.store, idem::test::quiet_config()};
  // The caller's connection reaches no idem_records table of the store's (another schema).
  idem::pg_test::private_schema elsewhere("async_elsewhere");
  idem::pg_test::raw_connection foreign{elsewhere.conninfo()};
  foreign.query("DROP TABLE idem_records");
  const auto ctx = engine.make_context("Orders.async", idem::pg_test::unique_name("refused"),
                                       {.completion = idem::completion_mode::join_transaction});
  bool refused = false;
  int runs = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        idem::postgres_transaction tx{foreign.get()};
        try {
          auto unexpected = co_await idem::async_execute(engine, ctx, tx, [&] { return ++runs; }, idem::json_codec{},
                                                         asio::use_awaitable);
          CHECK_FALSE(unexpected.ran());
        } catch (const idem::configuration_error&) {
          refused = true;
        }
        tx.rollback();
      },
      asio::detached);
  io.run();
  CHECK(refused);
  CHECK(runs == 0);
  CHECK(f.status(ctx.id) == "absent");  // nothing acquired
}
