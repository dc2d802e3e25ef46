// tests/postgres/postgres_required_coroutine_test.cpp — a coroutine method with transaction =
// "required" and join-transaction on the fixture's PostgreSQL: its order row and its record
// commit together in the transaction its wrapper began, or neither does.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <idem/engine.hpp>
#include <idem/postgres_store.hpp>

#include "postgres_test_support.hpp"
#include "required_coroutine.idem.hpp"

namespace asio = boost::asio;
using idem::pg_test::raw_connection;

TEST_CASE("a coroutine's required transaction commits its write and its record together, or neither",
          "[postgres][transaction][async]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store(idem::pg_test::store_options("required-coroutine"));
  idem::engine engine(store);
  raw_connection db;
  const std::string table = idem::pg_test::unique_name("entries");
  db.query("CREATE TABLE " + table + " (id text PRIMARY KEY, amount bigint NOT NULL)");
  const auto rows = [&] { return std::stoll(db.scalar("SELECT count(*) FROM " + table)); };
  const auto recorded = [&](const std::string& key) {
    const auto record = store.inspect_record(idem::identity("postgres_tab.post", key), false);
    return record && record->state == idem::record_state::completed;
  };
  idem::postgres_transaction_source transactions{db.get()};
  idem::guarded<ledger_test::postgres_tab> tab{engine, transactions, db.get(), table};
  const std::string kept = idem::pg_test::unique_name("kept");
  const std::string declined = idem::pg_test::unique_name("declined");

  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        CHECK(co_await tab.post(kept, 5) == 5);
        CHECK(rows() == 1);
        CHECK(recorded(kept));
        CHECK(idem::current_transaction() == nullptr);
        CHECK(co_await tab.post(kept, 9) == 5);  // replayed: no second row
        for (int attempt = 0; attempt < 2; ++attempt) {
          bool refused = false;
          try {
            (void)co_await tab.post(declined, -1);
          } catch (const std::runtime_error&) {
            refused = true;
          }
          CHECK(refused);
        }
      },
      asio::detached);
  io.run();
  CHECK(rows() == 1);  // the declined rows rolled back with their records
  CHECK_FALSE(recorded(declined));
  CHECK(tab.posts == 3);  // the declined key was released each time: its retry ran
}
