// tests/sqlite/sqlite_required_transaction_test.cpp — transaction = "required" through the
// generated idem::guarded<C> on a real SQLite file: the wrapper begins the transaction before it
// claims, the record is written inside it, and the commit or the rollback decides both together.
#include <catch2/catch.hpp>

#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/sqlite_store.hpp>
#include <idem/sqlite_transaction.hpp>

#include <future>
#include <stdexcept>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "required_ledger.idem.hpp"
#include "sqlite_test_support.hpp"
#include "support/redelivery.hpp"
#include "support/faulty_store.hpp"

using namespace std::chrono_literals;
using idem::sqlite_test::exec;
using idem::sqlite_test::open_connection;
using idem::sqlite_test::query_int;

namespace {

// A store, an engine, and the application's connection to the same file, with its own table.
struct setup {
  explicit setup(std::string_view hint)
      : path(idem::sqlite_test::fresh_db_path(hint)),
        store(idem::sqlite_test::options_for(path)),
        engine(store),
        db(open_connection(path)) {
    exec(db.get(), "CREATE TABLE IF NOT EXISTS entries (id TEXT PRIMARY KEY, amount INTEGER)");
  }
  long long entries() const { return query_int(db.get(), "SELECT count(*) FROM entries"); }

  std::filesystem::path path;
  idem::sqlite_store store;
  idem::engine engine;
  idem::sqlite_test::connection db;
};

// Whether the record of `e` is complete (looked at without claiming it).
bool recorded(idem::sqlite_store& store, const ledger_test::entry& e) {
  const auto record = store.inspect_record(idem::identity("sqlite_ledger.post", e.id), false);
  return record && record->state == idem::record_state::completed;
}

}  // namespace

TEST_CASE("a required transaction commits the business write and the record together", "[sqlite][transaction]") {
  setup s("required-commit");
  idem::sqlite_transaction_source transactions{s.db.get()};
  idem::guarded<ledger_test::sqlite_ledger> ledger{s.engine, transactions, s.db.get()};
  const ledger_test::entry e{.id = "entry-1", .amount = 5};

  CHECK(ledger.post(e) == 5);
  CHECK(idem::current_transaction() == nullptr);  // begun and ended by the wrapper
  CHECK(s.entries() == 1);
  CHECK(recorded(s.store, e));
  CHECK(ledger.post({.id = "entry-1", .amount = 9}) == 5);  // a redelivery: the first result, no write
  CHECK(s.entries() == 1);
}

TEST_CASE("a required transaction rolls back the write and frees the key when the method throws",
          "[sqlite][transaction]") {
  setup s("required-rollback");
  idem::sqlite_transaction_source transactions{s.db.get()};
  idem::guarded<ledger_test::sqlite_ledger> ledger{s.engine, transactions, s.db.get()};

  CHECK_THROWS_WITH(ledger.post({.id = "entry-2", .amount = 7, .decline = true}), "declined");
  CHECK(idem::current_transaction() == nullptr);
  CHECK(s.entries() == 0);
  CHECK(ledger.post({.id = "entry-2", .amount = 7}) == 7);  // the key was released: a retry runs
  CHECK(s.entries() == 1);
}

TEST_CASE("a required method joins the transaction its caller has active", "[sqlite][transaction]") {
  setup s("required-join");
  idem::sqlite_transaction_source transactions{s.db.get()};
  idem::guarded<ledger_test::sqlite_ledger> ledger{s.engine, transactions, s.db.get()};
  const ledger_test::entry e{.id = "entry-3", .amount = 3};
  {
    idem::sqlite_transaction tx{s.db.get()};
    CHECK(ledger.post(e) == 3);
    CHECK(idem::current_transaction() == &tx);  // still the caller's: the wrapper began none
    tx.rollback();
  }
  CHECK(s.entries() == 0);
  CHECK_FALSE(recorded(s.store, e));
  CHECK(ledger.post(e) == 3);  // the rollback released the record
  CHECK(s.entries() == 1);
}

TEST_CASE("a duplicate while the required transaction is open is answered in flight", "[sqlite][transaction]") {
  setup s("required-duplicate");
  idem::sqlite_transaction_source transactions{s.db.get()};
  idem::guarded<ledger_test::sqlite_ledger> ledger{s.engine, transactions, s.db.get()};
  const ledger_test::entry e{.id = "entry-4", .amount = 4};

  // Another consumer of the same file, on its own connection and thread.
  auto other_db = open_connection(s.path);
  idem::sqlite_transaction_source other_transactions{other_db.get()};
  idem::guarded<ledger_test::sqlite_ledger> other{s.engine, other_transactions, other_db.get()};
  bool in_flight = false;
  ledger.after_write = [&] {
    std::async(std::launch::async, [&] {
      try {
        (void)other.post(e);
      } catch (const idem::in_flight_error&) {
        in_flight = true;
      }
    }).get();
  };
  CHECK(ledger.post(e) == 4);
  CHECK(in_flight);
  CHECK(s.entries() == 1);
}

TEST_CASE("a holder paused past its lease cannot commit its required transaction", "[sqlite][transaction]") {
  const auto path = idem::sqlite_test::fresh_db_path("required-paused");
  idem::sqlite_store real(idem::sqlite_test::options_for(path));
  idem::test::faulty_store store(real);
  store.before_extend = [](const idem::identity&) { return false; };  // the holder's process is paused
  idem::engine engine(store);
  auto db = open_connection(path);
  exec(db.get(), "CREATE TABLE entries (id TEXT PRIMARY KEY, amount INTEGER)");
  idem::sqlite_transaction_source transactions{db.get()};
  idem::guarded<ledger_test::sqlite_ledger> ledger{engine, transactions, db.get()};
  const ledger_test::entry e{.id = "entry-6", .amount = 8};

  // While the holder is paused (before its write: once it wrote, its transaction holds the file's
  // write lock), its lease (1 s) lapses and another caller takes the record over.
  ledger.before_write = [&] {
    const auto ctx = engine.make_context("sqlite_ledger.post", e.id, {.lease = 30s, .wait = 0ms});
    REQUIRE(idem::test::eventually([&] { return std::holds_alternative<idem::acquired>(real.try_acquire(ctx)); }, 10s));
  };
  CHECK_THROWS_AS(ledger.post(e), idem::lease_lost_error);
  CHECK(idem::current_transaction() == nullptr);
  CHECK(query_int(db.get(), "SELECT count(*) FROM entries") == 0);  // its write rolled back
  CHECK_FALSE(recorded(real, e));
}

TEST_CASE("a process killed between its write and its commit leaves neither, and the key recovers",
          "[sqlite][transaction]") {
  const auto path = idem::sqlite_test::fresh_db_path("required-crash");
  {
    auto db = open_connection(path);
    exec(db.get(), "CREATE TABLE entries (id TEXT PRIMARY KEY, amount INTEGER)");
  }
  const ledger_test::entry e{.id = "entry-5", .amount = 6};
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    idem::sqlite_store store(idem::sqlite_test::options_for(path));
    idem::engine engine(store);
    auto db = open_connection(path);
    idem::sqlite_transaction_source transactions{db.get()};
    idem::guarded<ledger_test::sqlite_ledger> ledger{engine, transactions, db.get()};
    ledger.after_write = [] { ::_exit(9); };  // dies with the write done and the commit not
    (void)ledger.post(e);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 9);

  idem::sqlite_store store(idem::sqlite_test::options_for(path));
  idem::engine engine(store);
  auto db = open_connection(path);
  CHECK(query_int(db.get(), "SELECT count(*) FROM entries") == 0);
  CHECK_FALSE(recorded(store, e));
  // The dead process's claim holds the key until its lease (1 s) lapses; then a redelivery runs.
  idem::sqlite_transaction_source transactions{db.get()};
  idem::guarded<ledger_test::sqlite_ledger> ledger{engine, transactions, db.get()};
  const auto amount = idem::test::redeliver_until_run([&] { return ledger.post(e); }, 10s);
  REQUIRE(amount.has_value());
  CHECK(*amount == 6);
  CHECK(query_int(db.get(), "SELECT count(*) FROM entries") == 1);
  CHECK(recorded(store, e));
}
