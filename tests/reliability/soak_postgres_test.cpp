// tests/reliability/soak_postgres_test.cpp — the soak (soak.hpp) on a postgres_store over the
// "postgres" fixture's server, in a schema of its own. Sockets: the pool opens connections lazily
// up to pool_size and must never replace one; the LISTEN connection must never reconnect.
#include <catch2/catch.hpp>

#include <string>

#include <idem/postgres_store.hpp>

#include "postgres/postgres_test_support.hpp"
#include "reliability/soak.hpp"

TEST_CASE("postgres_store: bounded mixed traffic leaks nothing and runs no completed key twice", "[soak]") {
  idem::pg_test::private_schema schema("soak");
  idem::postgres_store_options options = idem::pg_test::store_options("soak");
  options.conninfo = schema.conninfo();
  options.pool_size = 8;
  idem::postgres_store store{options};
  idem::soak::store_probe probe;
  probe.max_connections = options.pool_size;
  probe.connections_opened = [&store] { return store.statistics().connections_opened; };
  probe.reconnects = [&store] { return store.statistics().listener_connects; };
  probe.extra = [&store] {
    const auto st = store.statistics();
    return "round trips " + std::to_string(st.round_trips) + ", LISTEN connects " + std::to_string(st.listener_connects);
  };
  idem::soak::run("postgres_store", store, probe, idem::soak::settings::from_environment());
}
