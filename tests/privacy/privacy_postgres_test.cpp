// Privacy on the PostgreSQL store (the "postgres" fixture's server): the main scenarios with the
// store's log sink captured, a store pointed at a closed port, and every column of every row of
// the table rendered as text (bytea as hex) scanned for the key.
#include "privacy/privacy_support.hpp"

#include <idem/postgres_store.hpp>

#include "postgres/postgres_test_support.hpp"

using namespace idem::privacy;
namespace pg = idem::pg_test;

TEST_CASE("postgres store: no scenario reveals the key, and the table never holds it", "[privacy]") {
  pg::private_schema schema("privacy");
  transcript t;
  {
    auto options = pg::store_options("privacy");
    options.conninfo = schema.conninfo();
    options.log = t.sink("postgres log");
    idem::postgres_store store{options};
    run_store_scenarios(store, t, "Privacy");
  }
  pg::raw_connection db(schema.conninfo());
  const auto rows = db.query("SELECT row_to_json(r)::text FROM idem_records r");
  CHECK(rows.size() == 4);  // run, throws (retried), fingerprint, lease: the records left complete
  for (const auto& row : rows) {
    INFO(row.at(0));
    CHECK_FALSE(reveals(row.at(0)));
  }
  t.require_clean(12);
}

TEST_CASE("postgres store: a server that cannot be reached is reported without the key", "[privacy]") {
  transcript t;
  idem::postgres_store_options options;
  options.conninfo = "host=127.0.0.1 port=" + std::to_string(closed_port()) + " dbname=idem connect_timeout=2";
  options.operation_timeout = std::chrono::milliseconds(500);
  options.log = t.sink("postgres log");
  idem::postgres_store store{options};
  idem::engine eng(store, idem::config{}, hooks_for(t));
  auto ctx = eng.make_context("Privacy.down", std::string(secret));
  expect_error(t, "store down (engine)", [&] { static_cast<void>(eng.execute(ctx, [] {})); });
  CHECK(t.contains("Privacy.down/#"));
  t.require_clean(3);
}
