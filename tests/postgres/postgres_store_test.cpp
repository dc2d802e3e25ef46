// tests/postgres/postgres_store_test.cpp — what postgres_store promises beyond the contract:
// the schema, what is stored, round trips, waiting by NOTIFY, transactions on the caller's
// connection, configuration.
#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <idem/errors.hpp>
#include <idem/postgres_store.hpp>
#include <idem/postgres_transaction.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <idem/testing/store_contract.hpp>
#include "postgres_test_support.hpp"

namespace {

using namespace std::chrono_literals;
using idem::contract::background;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::require_in_flight;
using idem::contract::sample_payload;
using idem::contract::stopwatch;
using idem::contract::unique_key;
using idem::pg_test::eventually;
using idem::pg_test::private_schema;
using idem::pg_test::raw_connection;
using idem::pg_test::store_options;

using idem::pg_test::make_ctx;
using idem::pg_test::new_id;

// Waits until the store's LISTEN connection is up, so a test can rely on notifications.
void require_listening(const idem::postgres_store& store) {
  REQUIRE(eventually([&] { return store.listener_backend_pid() != 0; }, 10s));
}

}  // namespace

TEST_CASE("store: creating the schema is idempotent, also from several sessions at once", "[postgres][schema]") {
  private_schema schema("schema_twice");  // created once already
  auto o = store_options();
  o.conninfo = schema.conninfo();
  idem::postgres_store store{o};
  store.create_schema();
  store.create_schema();

  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&] {
        try {
          idem::postgres_store other{o};
          other.create_schema();
        } catch (...) {
          ++failures;
        }
      });
    }
  }
  CHECK(failures == 0);

  raw_connection conn{schema.conninfo()};
  CHECK(conn.scalar("SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'idem_records'",
                    {schema.name()}) == "1");
  const auto id = new_id("Schema.twice");
  const auto token = require_acquired(store.try_acquire(make_ctx(id)));
  store.complete(id, token, sample_payload(), 1h);
  CHECK(require_duplicate(store.try_acquire(make_ctx(id))).value == sample_payload());
}

TEST_CASE("store: the embedded schema is the shipped schema.sql", "[postgres][schema]") {
  std::ifstream in(IDEM_PG_SCHEMA_FILE);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == idem::postgres_store::schema_sql());
}

TEST_CASE("store: the raw key never reaches the database, its SHA-256 does", "[postgres][security]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store{store_options()};
  const std::string key = unique_key("raw-key-marker");
  const idem::identity id("RawKey.check", key);
  idem::context ctx = make_ctx(id);
  ctx.fingerprint = std::string(64, 'a');
  const auto token = require_acquired(store.try_acquire(ctx));

  raw_connection conn;
  const std::string hex_key = conn.scalar("SELECT encode(convert_to($1, 'UTF8'), 'hex')", {key});
  const std::string by_row = "SELECT r::text FROM idem_records r WHERE scope = 'RawKey.check'";
  for (const auto& row : conn.query(by_row)) {
    CHECK(row[0].find(key) == std::string::npos);
    CHECK(row[0].find(hex_key) == std::string::npos);
  }
  store.complete(id, token, sample_payload(), 1h);
  const auto rows = conn.query(by_row);
  REQUIRE(!rows.empty());
  for (const auto& row : rows) {
    CHECK(row[0].find(key) == std::string::npos);
    CHECK(row[0].find(hex_key) == std::string::npos);
  }
  CHECK(conn.scalar("SELECT count(*) FROM idem_records WHERE scope = 'RawKey.check' AND key_digest = "
                    "sha256(convert_to($1, 'UTF8'))",
                    {key}) == "1");
}

TEST_CASE("store: one round trip claims or replays, one completes", "[postgres][round-trips]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store{store_options()};
  // Warm up: each statement is prepared once per connection.
  const auto warm = new_id("RoundTrips.count");
  store.complete(warm, require_acquired(store.try_acquire(make_ctx(warm))), sample_payload(), 1h);
  require_duplicate(store.try_acquire(make_ctx(warm)));

  const auto id = new_id("RoundTrips.count");
  auto before = store.statistics().round_trips;
  const auto token = require_acquired(store.try_acquire(make_ctx(id)));
  CHECK(store.statistics().round_trips - before == 1);

  before = store.statistics().round_trips;
  store.complete(id, token, sample_payload(), 1h);
  CHECK(store.statistics().round_trips - before == 1);

  before = store.statistics().round_trips;
  require_duplicate(store.try_acquire(make_ctx(id)));
  CHECK(store.statistics().round_trips - before == 1);
}

TEST_CASE("store: a waiter is woken by the notification long before any poll or lease", "[postgres][notify]") {
  idem::pg_test::ensure_schema();
  auto o = store_options();
  o.fallback_recheck = 60s;  // a poll could not explain a prompt answer
  idem::postgres_store store{o};
  require_listening(store);
  const auto id = new_id("Notify.wake");
  const auto token = require_acquired(store.try_acquire(make_ctx(id, 0ms, 30s)));

  background<idem::acquire_result> waiter([&] { return store.try_acquire(make_ctx(id, 20s)); });
  // No event tells us the waiter is inside try_acquire; give it a moment to get there.
  CHECK_FALSE(waiter.finished_within(300ms));
  store.complete(id, token, sample_payload(), 1h);
  REQUIRE(waiter.finished_within(2s));
  CHECK(require_duplicate(waiter.result()).value == sample_payload());
}

TEST_CASE("store: a release wakes every waiter of its record and one of them acquires", "[postgres][notify]") {
  idem::pg_test::ensure_schema();
  auto o = store_options();
  o.fallback_recheck = 60s;
  idem::postgres_store store{o};
  require_listening(store);
  const auto id = new_id("Notify.release");
  const auto token = require_acquired(store.try_acquire(make_ctx(id, 0ms, 30s)));

  std::vector<std::unique_ptr<background<idem::acquire_result>>> waiters;
  for (int i = 0; i < 3; ++i)
    waiters.push_back(
        std::make_unique<background<idem::acquire_result>>([&] { return store.try_acquire(make_ctx(id, 3s, 30s)); }));
  CHECK_FALSE(waiters.front()->finished_within(300ms));
  store.release(id, token);
  // One waiter acquires at once; the others, woken too, find it held and wait out their 3 s.
  int acquired = 0;
  int in_flight = 0;
  for (auto& w : waiters) {
    REQUIRE(w->finished_within(10s));
    const auto r = w->result();
    acquired += std::holds_alternative<idem::acquired>(r) ? 1 : 0;
    in_flight += std::holds_alternative<idem::in_flight>(r) ? 1 : 0;
  }
  CHECK(acquired == 1);
  CHECK(in_flight == 2);
}

TEST_CASE("store: extend never blocks on a record an open transaction is completing", "[postgres][transaction]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store{store_options()};
  raw_connection conn;
  const auto id = new_id("Extend.locked");
  const auto token = require_acquired(store.try_acquire(make_ctx(id)));
  idem::postgres_transaction tx{conn.get()};
  store.complete_in_transaction(id, token, sample_payload(), 1h, tx);

  const stopwatch watch;
  CHECK_FALSE(store.extend(id, token, 30s));  // the row is locked by tx: skipped, not waited for
  require_in_flight(store.try_acquire(make_ctx(id, 0ms)));
  CHECK(watch.elapsed() < 2s);
  tx.commit();
  require_duplicate(store.try_acquire(make_ctx(id, 0ms)));
}

TEST_CASE("store: a completion inside a transaction wakes waiters at commit, not before", "[postgres][transaction]") {
  idem::pg_test::ensure_schema();
  auto o = store_options();
  o.fallback_recheck = 60s;
  idem::postgres_store store{o};
  require_listening(store);
  raw_connection conn;
  const auto id = new_id("Notify.commit");
  const auto token = require_acquired(store.try_acquire(make_ctx(id)));
  background<idem::acquire_result> waiter([&] { return store.try_acquire(make_ctx(id, 20s)); });

  idem::postgres_transaction tx{conn.get()};
  store.complete_in_transaction(id, token, sample_payload(), 1h, tx);
  CHECK_FALSE(waiter.finished_within(500ms));
  tx.commit();
  REQUIRE(waiter.finished_within(2s));
  CHECK(require_duplicate(waiter.result()).value == sample_payload());
}

TEST_CASE("store: complete_in_transaction refuses a transaction of another type", "[postgres][transaction]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store{store_options()};
  const auto id = new_id("Foreign.tx");
  const auto token = require_acquired(store.try_acquire(make_ctx(id)));
  struct other_transaction final : idem::basic_transaction {};
  other_transaction other;
  CHECK_THROWS_AS(store.complete_in_transaction(id, token, sample_payload(), 1h, other), idem::configuration_error);
  CHECK_THROWS_WITH(store.complete_in_transaction(id, token, sample_payload(), 1h, other),
                    Catch::Contains("idem::postgres_transaction") && Catch::Contains(id.to_string()));
  store.release(id, token);
}

TEST_CASE("store: purge counts exactly on a private schema and works through a backlog larger than a batch",
          "[postgres][purge]") {
  private_schema schema("purge_exact");
  auto o = store_options();
  o.conninfo = schema.conninfo();
  o.purge_batch = 3;
  idem::postgres_store store{o};
  for (int i = 0; i < 7; ++i) {
    const auto id = new_id("Purge.exact");
    store.complete(id, require_acquired(store.try_acquire(make_ctx(id))), sample_payload(), 1ms);
  }
  const auto live = new_id("Purge.exact");
  store.complete(live, require_acquired(store.try_acquire(make_ctx(live))), sample_payload(), 1h);
  const auto held = new_id("Purge.exact");
  require_acquired(store.try_acquire(make_ctx(held, 0ms, 30s, 1ms)));  // ttl passed, lease live
  raw_connection conn{schema.conninfo()};
  REQUIRE(eventually([&] { return conn.scalar("SELECT count(*) FROM idem_records WHERE expires_at <= now()") == "8"; },
                     5s));
  CHECK(store.purge_expired() == 7);
  CHECK(store.purge_expired() == 0);
  CHECK(conn.scalar("SELECT count(*) FROM idem_records") == "2");
}

TEST_CASE("store: configuration errors fail in the constructor", "[postgres][config]") {
  auto o = store_options();
  SECTION("pool size") {
    o.pool_size = 0;
    CHECK_THROWS_WITH(idem::postgres_store{o}, Catch::Contains("pool_size"));
    o.pool_size = 1001;
    CHECK_THROWS_AS(idem::postgres_store{o}, idem::configuration_error);
  }
  SECTION("conninfo") {
    o.conninfo = "";
    CHECK_THROWS_AS(idem::postgres_store{o}, idem::configuration_error);
    o.conninfo = "host=localhost nonsense_keyword=1";
    CHECK_THROWS_WITH(idem::postgres_store{o}, Catch::Contains("conninfo"));
    o.conninfo = "host=localhost dbname";
    CHECK_THROWS_AS(idem::postgres_store{o}, idem::configuration_error);
  }
  SECTION("durations and batch") {
    o.operation_timeout = 0ms;
    CHECK_THROWS_WITH(idem::postgres_store{o}, Catch::Contains("operation_timeout"));
    o.operation_timeout = 1s;
    o.fallback_recheck = 0ms;
    CHECK_THROWS_WITH(idem::postgres_store{o}, Catch::Contains("fallback_recheck"));
    o.fallback_recheck = 1s;
    o.purge_batch = 0;
    CHECK_THROWS_WITH(idem::postgres_store{o}, Catch::Contains("purge_batch"));
  }
}

TEST_CASE("transaction: binds to the thread, and its destructor rolls back", "[postgres][transaction]") {
  raw_connection conn;
  conn.query("CREATE TEMP TABLE tx_probe (v int)");
  bool committed = false;
  bool rolled_back = false;
  {
    idem::postgres_transaction tx{conn.get()};
    CHECK(idem::current_transaction() == &tx);
    CHECK(tx.active());
    tx.after_commit([&] { committed = true; });
    tx.after_rollback([&] { rolled_back = true; });
    conn.query("INSERT INTO tx_probe VALUES (1)");
  }
  CHECK(idem::current_transaction() == nullptr);
  CHECK(rolled_back);
  CHECK_FALSE(committed);
  CHECK(conn.scalar("SELECT count(*) FROM tx_probe") == "0");

  {
    idem::postgres_transaction tx{conn.get()};
    tx.after_commit([&] { committed = true; });
    conn.query("INSERT INTO tx_probe VALUES (2)");
    tx.commit();
    CHECK_FALSE(tx.active());
    CHECK_THROWS_AS(tx.commit(), idem::error);
  }
  CHECK(committed);
  CHECK(conn.scalar("SELECT count(*) FROM tx_probe") == "1");
}

TEST_CASE("transaction: a commit that cannot commit runs the rollback callbacks and throws",
          "[postgres][transaction]") {
  raw_connection conn;
  bool committed = false;
  bool rolled_back = false;
  idem::postgres_transaction tx{conn.get()};
  tx.after_commit([&] { committed = true; });
  tx.after_rollback([&] { rolled_back = true; });
  CHECK_THROWS(conn.query("SELECT 1/0"));  // the transaction has failed
  CHECK_THROWS_WITH(tx.commit(), Catch::Contains("rolled back"));
  CHECK(rolled_back);
  CHECK_FALSE(committed);
  CHECK(PQtransactionStatus(conn.get()) == PQTRANS_IDLE);
}

TEST_CASE("transaction: refuses a connection it cannot begin on", "[postgres][transaction]") {
  CHECK_THROWS_AS(idem::postgres_transaction{nullptr}, idem::configuration_error);
  raw_connection conn;
  conn.query("BEGIN");
  CHECK_THROWS_WITH(idem::postgres_transaction{conn.get()}, Catch::Contains("already inside"));
  conn.query("ROLLBACK");
  CHECK(idem::current_transaction() == nullptr);
}

namespace {

// A database of its own on the fixture's server with the idem schema in it, dropped at the end.
class other_database {
 public:
  other_database() : name_(idem::pg_test::unique_name("joinother")) {
    raw_connection admin;
    admin.query("CREATE DATABASE " + name_);
    conninfo_ = idem::pg_test::conninfo() + " dbname=" + name_;
    idem::postgres_store store{[&] {
      auto o = store_options();
      o.conninfo = conninfo_;
      return o;
    }()};
    store.create_schema();
  }
  ~other_database() {
    try {
      raw_connection admin;
      admin.query("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    } catch (...) {
    }
  }
  other_database(const other_database&) = delete;
  other_database& operator=(const other_database&) = delete;

  const std::string& name() const noexcept { return name_; }
  const std::string& conninfo() const noexcept { return conninfo_; }

 private:
  std::string name_;
  std::string conninfo_;
};

}  // namespace

TEST_CASE("store: join_problem accepts a postgres_transaction reaching the store's table and says what is wrong "
          "otherwise",
          "[postgres][transaction]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store{store_options()};

  SECTION("the store's database and table: accepted, and the transaction stays usable") {
    raw_connection conn;
    idem::postgres_transaction tx{conn.get()};
    CHECK(store.join_problem(tx).empty());
    CHECK(store.join_problem(tx).empty());  // asked again: the same answer
    CHECK(PQtransactionStatus(conn.get()) == PQTRANS_INTRANS);
    tx.commit();
  }
  SECTION("another transaction type") {
    struct other_transaction final : idem::basic_transaction {};
    other_transaction other;
    CHECK_THAT(store.join_problem(other), Catch::Contains("idem::postgres_transaction") && Catch::Contains("another type"));
  }
  SECTION("another database on the same server") {
    other_database other;
    raw_connection conn(other.conninfo());
    idem::postgres_transaction tx{conn.get()};
    const std::string problem = store.join_problem(tx);
    CHECK_THAT(problem, Catch::Contains("database \"" + other.name() + "\"") && Catch::Contains("\"postgres\""));
  }
  SECTION("the same database, but a search_path that leads to another idem_records table") {
    private_schema schema("join_other_table");
    raw_connection conn(schema.conninfo());
    idem::postgres_transaction tx{conn.get()};
    CHECK_THAT(store.join_problem(tx), Catch::Contains("another idem_records table"));
  }
  SECTION("a search_path without an idem_records table") {
    raw_connection conn(idem::pg_test::conninfo_with_schema(idem::pg_test::conninfo(), "no_such_schema"));
    idem::postgres_transaction tx{conn.get()};
    CHECK_THAT(store.join_problem(tx), Catch::Contains("no idem_records table"));
  }
  SECTION("a transaction that failed") {
    raw_connection conn;
    idem::postgres_transaction tx{conn.get()};
    PQclear(PQexec(conn.get(), "SELECT 1/0"));
    CHECK_THAT(store.join_problem(tx), Catch::Contains("has failed"));
  }
  SECTION("a transaction that ended") {
    raw_connection conn;
    idem::postgres_transaction tx{conn.get()};
    tx.commit();
    CHECK_THAT(store.join_problem(tx), Catch::Contains("already ended"));
  }
}

TEST_CASE("store: complete_in_transaction refuses another database with join_problem's reason",
          "[postgres][transaction]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store{store_options()};
  const auto id = new_id("Join.elsewhere");
  const auto token = require_acquired(store.try_acquire(make_ctx(id)));
  other_database other;
  raw_connection conn(other.conninfo());
  idem::postgres_transaction tx{conn.get()};
  std::string message;
  try {
    store.complete_in_transaction(id, token, sample_payload(), 1h, tx);
  } catch (const idem::configuration_error& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains(other.name()) && Catch::Contains(id.to_string()));
  CHECK_THAT(message, !Catch::Contains(id.key()));
  tx.rollback();
  store.complete(id, token, sample_payload(), 1h);  // the refusal left the record alone
}

TEST_CASE("store: extend_in_transaction answers whether the record is held under the token",
          "[postgres][transaction]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store{store_options()};
  raw_connection conn;
  const auto id = new_id("Extend.in_tx");
  const auto old_token = require_acquired(store.try_acquire(make_ctx(id, 0ms, 50ms)));
  {
    idem::postgres_transaction tx{conn.get()};
    CHECK(store.extend_in_transaction(id, old_token, 50ms, tx));
    tx.rollback();
  }
  std::this_thread::sleep_for(150ms);  // the lease runs out; another caller takes the record over
  const auto new_token = require_acquired(store.try_acquire(make_ctx(id, 0ms)));
  {
    idem::postgres_transaction tx{conn.get()};
    CHECK_FALSE(store.extend_in_transaction(id, old_token, 30s, tx));
    CHECK(store.extend_in_transaction(id, new_token, 30s, tx));
    tx.commit();
  }
  struct other_transaction final : idem::basic_transaction {};
  other_transaction other;  // not joinable: the plain extend answers
  CHECK(store.extend_in_transaction(id, new_token, 30s, other));
  CHECK_FALSE(store.extend_in_transaction(id, old_token, 30s, other));
}

TEST_CASE("store: extend_in_transaction extends a row the caller's transaction has locked, and commits with it",
          "[postgres][transaction]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store{store_options()};
  raw_connection conn;
  const auto id = new_id("Extend.own_lock");
  const auto token = require_acquired(store.try_acquire(make_ctx(id, 0ms, 100ms)));
  const bool commit = GENERATE(true, false);
  {
    idem::postgres_transaction tx{conn.get()};
    // The caller's transaction locks the record's row, as its own writes to it would.
    REQUIRE(conn.query("SELECT 1 FROM idem_records WHERE scope = $1 AND lease_token = $2::uuid FOR UPDATE",
                       {id.scope(), token.to_string()})
                .size() == 1);
    CHECK_FALSE(store.extend(id, token, 60s));  // another connection skips the locked row
    CHECK(store.extend_in_transaction(id, token, 60s, tx));
    if (commit) tx.commit();
  }
  std::this_thread::sleep_for(250ms);  // past the lease of the acquisition
  INFO((commit ? "committed" : "rolled back"));
  if (commit) {
    CHECK(require_in_flight(store.try_acquire(make_ctx(id, 0ms))).retry_after > 30s);  // the 60 s lease holds
  } else {
    require_acquired(store.try_acquire(make_ctx(id, 0ms)));  // the extension went with the rollback: stolen
  }
}
