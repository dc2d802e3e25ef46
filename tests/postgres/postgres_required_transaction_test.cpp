// tests/postgres/postgres_required_transaction_test.cpp — transaction = "required" through the
// generated idem::guarded<C> on the fixture's real PostgreSQL server: the wrapper begins the
// transaction before it claims, the record is written inside it, and the commit or the rollback
// decides both together.
#include <catch2/catch.hpp>

#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/postgres_store.hpp>
#include <idem/postgres_transaction.hpp>

#include <future>
#include <stdexcept>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "postgres_test_support.hpp"
#include "required_ledger.idem.hpp"
#include "support/faulty_store.hpp"
#include "support/redelivery.hpp"

using namespace std::chrono_literals;
using idem::pg_test::raw_connection;

namespace {

constexpr std::string_view scope = "postgres_ledger.post";

// A table of the case's own for the business rows.
std::string fresh_table(raw_connection& db) {
  const std::string table = idem::pg_test::unique_name("entries");
  db.query("CREATE TABLE " + table + " (id text PRIMARY KEY, amount bigint NOT NULL)");
  return table;
}

long long rows(raw_connection& db, const std::string& table) {
  return std::stoll(db.scalar("SELECT count(*) FROM " + table));
}

// Whether the record of `e` is complete (looked at without claiming it).
bool recorded(idem::store& store, const ledger_test::pg_entry& e) {
  const auto record = store.inspect_record(idem::identity(std::string(scope), e.id), false);
  return record && record->state == idem::record_state::completed;
}

ledger_test::pg_entry fresh_entry(long amount) { return {.id = idem::pg_test::unique_name("entry"), .amount = amount}; }

// A store, an engine, the application's connection with a table of its own, and the ledger
// guarded on that connection.
struct setup {
  explicit setup(const char* hint)
      : store((idem::pg_test::ensure_schema(), idem::pg_test::store_options(hint))),
        engine(store),
        table(fresh_table(db)),
        transactions(db.get()),
        ledger(engine, transactions, db.get(), table) {}
  long long entries() { return rows(db, table); }

  idem::postgres_store store;
  idem::engine engine;
  raw_connection db;
  std::string table;
  idem::postgres_transaction_source transactions;
  idem::guarded<ledger_test::postgres_ledger> ledger;
};

}  // namespace

TEST_CASE("a required transaction commits the business write and the record together", "[postgres][transaction]") {
  setup s("required-commit");
  const auto e = fresh_entry(5);

  CHECK(s.ledger.post(e) == 5);
  CHECK(idem::current_transaction() == nullptr);  // begun and ended by the wrapper
  CHECK(s.entries() == 1);
  CHECK(recorded(s.store, e));
  CHECK(s.ledger.post({.id = e.id, .amount = 9}) == 5);  // a redelivery: the first result, no write
  CHECK(s.entries() == 1);
}

TEST_CASE("a required transaction rolls back the write and frees the key when the method throws",
          "[postgres][transaction]") {
  setup s("required-rollback");
  auto e = fresh_entry(7);

  e.decline = true;
  CHECK_THROWS_WITH(s.ledger.post(e), "declined");
  CHECK(idem::current_transaction() == nullptr);
  CHECK(s.entries() == 0);
  e.decline = false;
  CHECK(s.ledger.post(e) == 7);  // the key was released: a retry runs
  CHECK(s.entries() == 1);
}

TEST_CASE("a duplicate while the required transaction is open is answered in flight", "[postgres][transaction]") {
  setup s("required-duplicate");
  raw_connection other_db;
  idem::postgres_transaction_source other_transactions{other_db.get()};
  idem::guarded<ledger_test::postgres_ledger> other{s.engine, other_transactions, other_db.get(), s.table};
  const auto e = fresh_entry(4);

  bool in_flight = false;
  s.ledger.after_write = [&] {
    std::async(std::launch::async, [&] {
      try {
        (void)other.post(e);
      } catch (const idem::in_flight_error&) {
        in_flight = true;
      }
    }).get();
  };
  CHECK(s.ledger.post(e) == 4);
  CHECK(in_flight);
  CHECK(s.entries() == 1);
}

TEST_CASE("a holder paused past its lease cannot commit its required transaction", "[postgres][transaction]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store real(idem::pg_test::store_options("required-paused"));
  idem::test::faulty_store store(real);
  store.before_extend = [](const idem::identity&) { return false; };  // the holder's process is paused
  idem::engine engine(store);
  raw_connection db;
  const std::string table = fresh_table(db);
  idem::postgres_transaction_source transactions{db.get()};
  idem::guarded<ledger_test::postgres_ledger> ledger{engine, transactions, db.get(), table};
  const auto e = fresh_entry(8);

  // While the holder is paused after its write, its lease (1 s) lapses and another caller takes
  // the record over.
  ledger.after_write = [&] {
    const auto ctx = engine.make_context(std::string(scope), e.id, {.lease = 30s, .wait = 0ms});
    REQUIRE(idem::test::eventually([&] { return std::holds_alternative<idem::acquired>(real.try_acquire(ctx)); }, 10s));
  };
  CHECK_THROWS_AS(ledger.post(e), idem::lease_lost_error);
  CHECK(idem::current_transaction() == nullptr);
  CHECK(rows(db, table) == 0);  // its write rolled back with the refused completion
  CHECK_FALSE(recorded(real, e));
}

TEST_CASE("a process killed between its write and its commit leaves neither, and the key recovers",
          "[postgres][transaction]") {
  idem::pg_test::ensure_schema();
  std::string table;
  {
    raw_connection setup;
    table = fresh_table(setup);
  }
  const auto e = fresh_entry(6);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    idem::postgres_store store(idem::pg_test::store_options("required-crash"));
    idem::engine engine(store);
    raw_connection db;
    idem::postgres_transaction_source transactions{db.get()};
    idem::guarded<ledger_test::postgres_ledger> ledger{engine, transactions, db.get(), table};
    ledger.after_write = [] { ::_exit(9); };  // dies with the write done and the commit not
    (void)ledger.post(e);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 9);

  idem::postgres_store store(idem::pg_test::store_options("required-recover"));
  idem::engine engine(store);
  raw_connection db;
  CHECK(rows(db, table) == 0);
  CHECK_FALSE(recorded(store, e));
  // The dead process's claim holds the key until its lease (1 s) lapses; then a redelivery runs.
  idem::postgres_transaction_source transactions{db.get()};
  idem::guarded<ledger_test::postgres_ledger> ledger{engine, transactions, db.get(), table};
  const auto amount = idem::test::redeliver_until_run([&] { return ledger.post(e); }, 10s);
  REQUIRE(amount.has_value());
  CHECK(*amount == 6);
  CHECK(rows(db, table) == 1);
  CHECK(recorded(store, e));
}
