// tests/sqlite/sqlite_transaction_test.cpp — idem::sqlite_transaction, and the engine completing
// records with the application's own SQLite transactions.
#include <sqlite3.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/sqlite_store.hpp>
#include <idem/sqlite_transaction.hpp>
#include <idem/transaction.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>

#include <idem/testing/store_contract.hpp>
#include "sqlite_test_support.hpp"
#include "support/faulty_store.hpp"

namespace {

using namespace std::chrono_literals;
using idem::contract::background;
using idem::contract::fresh_identity;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::require_in_flight;
using idem::contract::sample_payload;
using idem::contract::stopwatch;
using idem::sqlite_test::exec;
using idem::sqlite_test::fresh_db_path;
using idem::sqlite_test::open_connection;
using idem::sqlite_test::options_for;
using idem::sqlite_test::query_int;
using std::chrono::milliseconds;

idem::context context_for(const idem::identity& id, milliseconds wait = 5s) {
  idem::context ctx{.id = id, .ttl = 1h, .lease = 30s, .wait = wait};
  ctx.validate();
  return ctx;
}

class foreign_transaction final : public idem::basic_transaction {};

// A file with the store's table and an application table, an engine, and a second store object
// standing in for another process.
struct shop {
  shop()
      : path(fresh_db_path("shop")), store(options_for(path)), observer(options_for(path)), db(open_connection(path)) {
    exec(db.get(), "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)");
  }
  idem::context join(const std::string& key) const {
    return engine.make_context("Orders.place", key, {.completion = idem::completion_mode::join_transaction});
  }
  idem::context autonomous(const std::string& key) const { return engine.make_context("Orders.place", key); }
  long long orders() const { return query_int(db.get(), "SELECT count(*) FROM orders"); }
  idem::acquire_result look(const idem::context& ctx) {
    idem::context once = ctx;
    once.wait = 0ms;
    return observer.try_acquire(once);
  }

  std::filesystem::path path;
  idem::sqlite_store store;
  idem::sqlite_store observer;
  idem::sqlite_test::connection db;
  idem::engine engine{store};
};

}  // namespace

TEST_CASE("sqlite_transaction binds itself, commits explicitly and rolls back on destruction",
          "[sqlite][transaction]") {
  auto db = open_connection(fresh_db_path("tx"));
  exec(db.get(), "CREATE TABLE t (x INTEGER)");
  int committed = 0;
  int rolled_back = 0;
  {
    idem::sqlite_transaction tx{db.get()};
    CHECK(idem::current_transaction() == &tx);
    CHECK(tx.active());
    tx.after_commit([&] { ++committed; });
    tx.after_rollback([&] { ++rolled_back; });
    exec(db.get(), "INSERT INTO t VALUES (1)");
    tx.commit();
    CHECK_FALSE(tx.active());
    CHECK_THROWS_AS(tx.commit(), idem::configuration_error);
  }
  CHECK(idem::current_transaction() == nullptr);
  CHECK(committed == 1);
  CHECK(rolled_back == 0);
  {
    idem::sqlite_transaction tx{db.get()};
    tx.after_commit([&] { ++committed; });
    tx.after_rollback([&] { ++rolled_back; });
    exec(db.get(), "INSERT INTO t VALUES (2)");
  }
  CHECK(committed == 1);
  CHECK(rolled_back == 1);
  CHECK(query_int(db.get(), "SELECT count(*) FROM t") == 1);

  SECTION("misuse") {
    CHECK_THROWS_AS(idem::sqlite_transaction(nullptr), idem::configuration_error);
    idem::sqlite_transaction outer{db.get()};
    CHECK_THROWS_AS(idem::sqlite_transaction(db.get()), idem::configuration_error);
    CHECK(idem::current_transaction() == &outer);
  }
  SECTION("a transaction SQLite ended on its own is no longer active") {
    idem::sqlite_transaction tx{db.get()};
    exec(db.get(), "ROLLBACK");
    CHECK_FALSE(tx.active());
  }
}

TEST_CASE("complete_in_transaction refuses other transactions with a clear message", "[sqlite][transaction]") {
  const auto path = fresh_db_path("refuse");
  idem::sqlite_store store{options_for(path)};
  const auto id = fresh_identity("refuse");
  const auto token = require_acquired(store.try_acquire(context_for(id)));

  foreign_transaction foreign;
  CHECK_THROWS_WITH(store.complete_in_transaction(id, token, sample_payload(), 1h, foreign),
                    Catch::Contains("sqlite_transaction") && Catch::Contains(id.to_string()));

  const auto other_path = fresh_db_path("refuse-other");
  auto other_db = open_connection(other_path);
  idem::sqlite_transaction other{other_db.get()};
  CHECK_THROWS_AS(store.complete_in_transaction(id, token, sample_payload(), 1h, other), idem::configuration_error);
  CHECK_THROWS_WITH(store.complete_in_transaction(id, token, sample_payload(), 1h, other),
                    Catch::Contains(other_path.filename().string()));
  other.rollback();

  // The record is untouched by the refusals.
  store.complete(id, token, sample_payload(), 1h);
}

TEST_CASE("join-transaction: the record commits and rolls back with the application's writes",
          "[sqlite][transaction]") {
  shop s;
  SECTION("commit") {
    const auto ctx = s.join("order-commit-" + idem::contract::unique_key("k"));
    {
      idem::sqlite_transaction tx{s.db.get()};
      const auto result = s.engine.execute(ctx, [&] { exec(s.db.get(), "INSERT INTO orders VALUES ('a')"); });
      CHECK(std::holds_alternative<idem::executed<void>>(result));
      require_in_flight(s.look(ctx));  // claimed for everyone, completed for nobody yet
      tx.commit();
    }
    require_duplicate(s.look(ctx));
    CHECK(s.orders() == 1);
    idem::sqlite_transaction tx{s.db.get()};
    const auto again = s.engine.execute(ctx, [&] { FAIL("ran twice"); });
    CHECK(std::holds_alternative<idem::replayed<void>>(again));
  }
  SECTION("rollback") {
    const auto ctx = s.join("order-rollback-" + idem::contract::unique_key("k"));
    {
      idem::sqlite_transaction tx{s.db.get()};
      (void)s.engine.execute(ctx, [&] { exec(s.db.get(), "INSERT INTO orders VALUES ('b')"); });
    }
    CHECK(s.orders() == 0);
    require_acquired(s.look(ctx));  // the rollback released the record
  }
}

TEST_CASE("an action that throws after writing in the caller's transaction frees its key when the transaction ends",
          "[sqlite][transaction]") {
  shop s;
  const auto completion = GENERATE(idem::completion_mode::join_transaction, idem::completion_mode::autonomous);
  const auto ctx = s.engine.make_context("Orders.place", "order-throws-" + idem::contract::unique_key("k"),
                                         {.completion = completion});
  {
    idem::sqlite_transaction tx{s.db.get()};
    // The write takes the file's write lock, so the store's connection cannot release beside it.
    CHECK_THROWS_WITH(s.engine.execute(ctx,
                                       [&] {
                                         exec(s.db.get(), "INSERT INTO orders VALUES ('t')");
                                         throw std::runtime_error("declined");
                                       }),
                      "declined");
    require_in_flight(s.look(ctx));  // released only once the transaction ends
  }
  CHECK(s.orders() == 0);
  require_acquired(s.look(ctx));  // not held until the lease (30 s) runs out
}

TEST_CASE("autonomous under a transaction: the record completes after the commit", "[sqlite][transaction]") {
  shop s;
  const auto ctx = s.autonomous("order-auto-" + idem::contract::unique_key("k"));
  idem::sqlite_transaction tx{s.db.get()};
  (void)s.engine.execute(ctx, [&] { exec(s.db.get(), "INSERT INTO orders VALUES ('c')"); });
  require_in_flight(s.look(ctx));
  tx.commit();
  require_duplicate(s.look(ctx));
}

TEST_CASE("a transaction that has already written takes the claim in with it instead of deadlocking",
          "[sqlite][transaction]") {
  shop s;
  const auto ctx = s.join("order-after-write-" + idem::contract::unique_key("k"));
  SECTION("commit") {
    idem::sqlite_transaction tx{s.db.get()};
    exec(s.db.get(), "INSERT INTO orders VALUES ('d')");  // holds the file's write lock from here
    const stopwatch watch;
    const auto result = s.engine.execute(ctx, [&] { exec(s.db.get(), "INSERT INTO orders VALUES ('e')"); });
    CHECK(std::holds_alternative<idem::executed<void>>(result));
    CHECK(watch.elapsed() < 2s);
    tx.commit();
    require_duplicate(s.look(ctx));
    CHECK(s.orders() == 2);
  }
  SECTION("after a read, so that a claim committed elsewhere would leave the transaction's snapshot stale") {
    idem::sqlite_transaction tx{s.db.get()};
    CHECK(query_int(s.db.get(), "SELECT count(*) FROM orders") == 0);
    (void)s.engine.execute(ctx, [&] { exec(s.db.get(), "INSERT INTO orders VALUES ('h')"); });
    tx.commit();
    require_duplicate(s.look(ctx));
    CHECK(s.orders() == 1);
  }
  SECTION("rollback") {
    {
      idem::sqlite_transaction tx{s.db.get()};
      exec(s.db.get(), "INSERT INTO orders VALUES ('f')");
      (void)s.engine.execute(ctx, [&] {});
    }
    require_acquired(s.look(ctx));
    CHECK(s.orders() == 0);
  }
}

TEST_CASE("a plain mutation while the thread's own transaction holds the write lock fails at once",
          "[sqlite][transaction]") {
  shop s;
  const auto id = fresh_identity("self-lock");
  const auto token = require_acquired(s.store.try_acquire(context_for(id)));
  idem::sqlite_transaction tx{s.db.get()};
  exec(s.db.get(), "INSERT INTO orders VALUES ('g')");
  const stopwatch watch;
  CHECK_THROWS_WITH(s.store.complete(id, token, sample_payload(), 1h),
                    Catch::Contains("sqlite_transaction") && Catch::Contains(id.to_string()));
  CHECK(watch.elapsed() < 1s);
  tx.rollback();
  s.store.complete(id, token, sample_payload(), 1h);
}

TEST_CASE("a waiter in the same store wakes when a joined completion commits", "[sqlite][transaction]") {
  shop s;
  const auto id = fresh_identity("wake-on-commit");
  const auto token = require_acquired(s.store.try_acquire(context_for(id)));
  background<idem::acquire_result> waiter([&] { return s.store.try_acquire(context_for(id, 20s)); });
  idem::sqlite_transaction tx{s.db.get()};
  s.store.complete_in_transaction(id, token, sample_payload(), 1h, tx);
  REQUIRE_FALSE(waiter.finished_within(100ms));
  const stopwatch watch;
  tx.commit();
  REQUIRE(waiter.finished_within(5s));
  CHECK(require_duplicate(waiter.result()).value == sample_payload());
  INFO("woken after " << watch.elapsed().count() << " ms");
  CHECK(watch.elapsed() < 1s);  // an event, not the cross-process re-check
}

TEST_CASE("join_problem accepts a sqlite_transaction on the store's file by any name and says what is wrong otherwise",
          "[sqlite][transaction]") {
  const auto path = fresh_db_path("join");
  idem::sqlite_store store{options_for(path)};

  SECTION("the store's file") {
    auto db = open_connection(path);
    idem::sqlite_transaction tx{db.get()};
    CHECK(store.join_problem(tx).empty());
  }
  SECTION("the store's file through a symlink") {
    const auto link = path.parent_path() / ("link-to-" + path.filename().string());
    std::filesystem::create_symlink(path, link);
    auto db = open_connection(link);
    idem::sqlite_transaction tx{db.get()};
    CHECK(store.join_problem(tx).empty());
  }
  SECTION("another transaction type") {
    foreign_transaction foreign;
    const std::string problem = store.join_problem(foreign);
    CHECK_THAT(problem, Catch::Contains("idem::sqlite_transaction") && Catch::Contains("another type"));
  }
  SECTION("another file") {
    const auto other_path = fresh_db_path("join-other");
    auto other = open_connection(other_path);
    idem::sqlite_transaction tx{other.get()};
    const std::string problem = store.join_problem(tx);
    CHECK_THAT(problem, Catch::Contains(other_path.filename().string()) && Catch::Contains(store.filename()));
  }
  SECTION("a connection that opened the file read-only") {
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    const idem::sqlite_test::connection db(raw);
    idem::sqlite_transaction tx{db.get()};
    CHECK_THAT(store.join_problem(tx), Catch::Contains("read-only"));
  }
  SECTION("a transaction that ended") {
    auto db = open_connection(path);
    idem::sqlite_transaction tx{db.get()};
    tx.commit();
    CHECK_THAT(store.join_problem(tx), Catch::Contains("no longer active"));
  }
}

TEST_CASE("complete_in_transaction refuses with join_problem's reason and names only the masked record",
          "[sqlite][transaction]") {
  const auto path = fresh_db_path("refuse-reason");
  idem::sqlite_store store{options_for(path)};
  const auto id = fresh_identity("refuse-reason");
  const auto token = require_acquired(store.try_acquire(context_for(id)));
  foreign_transaction foreign;
  std::string message;
  try {
    store.complete_in_transaction(id, token, sample_payload(), 1h, foreign);
  } catch (const idem::configuration_error& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains(store.join_problem(foreign)) && Catch::Contains(id.to_string()));
  CHECK_THAT(message, !Catch::Contains(id.key()));
}

TEST_CASE("extend_in_transaction answers whether the record is held under the token", "[sqlite][transaction]") {
  shop s;
  const auto id = fresh_identity("extend-in-tx");
  const auto old_token = require_acquired(s.store.try_acquire(
      [&] {
        idem::context ctx{.id = id, .ttl = 1h, .lease = 50ms, .wait = 0ms};
        ctx.validate();
        return ctx;
      }()));
  {
    idem::sqlite_transaction tx{s.db.get()};
    CHECK(s.store.extend_in_transaction(id, old_token, 50ms, tx));
    tx.rollback();
  }
  std::this_thread::sleep_for(150ms);  // the lease runs out; another caller takes the record over
  const auto new_token = require_acquired(s.observer.try_acquire(context_for(id, 0ms)));
  idem::sqlite_transaction tx{s.db.get()};
  CHECK_FALSE(s.store.extend_in_transaction(id, old_token, 30s, tx));
  CHECK(s.store.extend_in_transaction(id, new_token, 30s, tx));
  tx.commit();

  SECTION("another transaction type falls back to extend") {
    foreign_transaction foreign;
    CHECK(s.store.extend_in_transaction(id, new_token, 30s, foreign));
    CHECK_FALSE(s.store.extend_in_transaction(id, old_token, 30s, foreign));
  }
}

TEST_CASE("extend_in_transaction works while the caller's transaction holds the write lock, and commits with it",
          "[sqlite][transaction]") {
  shop s;
  const auto id = fresh_identity("extend-locked");
  idem::context short_lease{.id = id, .ttl = 1h, .lease = 100ms, .wait = 0ms};
  short_lease.validate();
  const auto token = require_acquired(s.store.try_acquire(short_lease));
  const bool commit = GENERATE(true, false);
  {
    idem::sqlite_transaction tx{s.db.get()};
    exec(s.db.get(), "INSERT INTO orders VALUES ('locked')");  // holds the file's write lock from here
    // A plain extend cannot write now; the one inside the transaction can.
    CHECK_THROWS_AS((void)s.store.extend(id, token, 60s), idem::store_unavailable_error);
    CHECK(s.store.extend_in_transaction(id, token, 60s, tx));
    if (commit) tx.commit();
  }
  std::this_thread::sleep_for(250ms);  // past the lease of the acquisition
  INFO((commit ? "committed" : "rolled back"));
  if (commit) {
    CHECK(require_in_flight(s.look(short_lease)).retry_after > 30s);  // the 60 s lease holds
    CHECK(s.orders() == 1);
  } else {
    require_acquired(s.look(short_lease));  // the extension went with the rollback: stolen
    CHECK(s.orders() == 0);
  }
}

TEST_CASE("a sqlite_transaction that ends inside the action: completed after a commit, released after a rollback",
          "[sqlite][transaction]") {
  shop s;
  const bool joined = GENERATE(false, true);
  INFO((joined ? "join-transaction" : "autonomous"));
  const std::string suffix = idem::contract::unique_key("k");
  {
    const auto ctx = joined ? s.join("inside-commit-" + suffix) : s.autonomous("inside-commit-" + suffix);
    idem::sqlite_transaction tx{s.db.get()};
    const auto o = s.engine.execute(ctx, [&] {
      exec(s.db.get(), "INSERT INTO orders VALUES ('committed-inside')");
      tx.commit();
    });
    CHECK(std::holds_alternative<idem::executed<void>>(o));
    require_duplicate(s.look(ctx));  // not left in progress for a redelivery to run again
    CHECK(s.orders() == 1);
  }
  {
    const auto ctx = joined ? s.join("inside-rollback-" + suffix) : s.autonomous("inside-rollback-" + suffix);
    idem::sqlite_transaction tx{s.db.get()};
    (void)s.engine.execute(ctx, [&] {
      exec(s.db.get(), "INSERT INTO orders VALUES ('rolled-back-inside')");
      tx.rollback();
    });
    require_acquired(s.look(ctx));  // released at once: a redelivery may run it
    CHECK(s.orders() == 1);
  }
}

TEST_CASE("a holder paused past its lease cannot commit its business rows after another caller completed the record",
          "[sqlite][transaction]") {
  shop s;
  std::atomic<bool> paused = false;
  idem::test::faulty_store holder_view{s.store};
  holder_view.before_extend = [&](const idem::identity&) { return !paused.load(); };  // no heartbeat while paused
  idem::engine holder{holder_view};
  const auto ctx = holder.make_context("Orders.place", "paused-" + idem::contract::unique_key("k"), {.lease = 100ms});
  {
    idem::sqlite_transaction tx{s.db.get()};
    CHECK(std::holds_alternative<idem::executed<void>>(holder.execute(ctx, [] {})));
    paused = true;
    std::this_thread::sleep_for(250ms);  // the lease expires while the holder's transaction is open
    const auto thief = require_acquired(s.observer.try_acquire(context_for(ctx.id, 0ms)));
    s.observer.complete(ctx.id, thief, sample_payload("second worker"), 1h);
    paused = false;
    exec(s.db.get(), "INSERT INTO orders VALUES ('first worker')");
    CHECK_THROWS_AS(tx.commit(), idem::lease_lost_error);
  }
  CHECK(s.orders() == 0);  // the first worker's rows went with the refused commit
  CHECK(require_duplicate(s.look(ctx)).value == sample_payload("second worker"));
}
