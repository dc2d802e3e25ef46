// tests/postgres/postgres_failure_test.cpp — postgres_store when things go wrong: a database that
// is down or stuck, connections the server kills, a LISTEN connection that cannot come back, lost
// races and locks. Every failure is real: closed ports, a socket that never answers,
// pg_terminate_backend, a role that may not log in, triggers that raise deadlocks.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <idem/errors.hpp>
#include <idem/postgres_store.hpp>
#include <string>
#include <variant>

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

// A TCP socket on 127.0.0.1 bound to a free port. With listen() it accepts connections into its
// backlog but never answers; without, the port refuses connections.
class local_socket {
 public:
  explicit local_socket(bool listening) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t size = sizeof addr;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &size) == 0);
    port_ = ntohs(addr.sin_port);
    if (listening) REQUIRE(::listen(fd_, 64) == 0);
  }
  ~local_socket() { ::close(fd_); }
  local_socket(const local_socket&) = delete;
  local_socket& operator=(const local_socket&) = delete;
  int port() const noexcept { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

std::string conninfo_for_port(int port) {
  return "host=127.0.0.1 port=" + std::to_string(port) + " user=idem dbname=postgres";
}

// Requires `operation` to throw store_unavailable_error naming `what` and `id` (if given), never
// the raw key.
template <class F>
void require_unavailable(F&& operation, std::string_view what, const idem::identity* id) {
  std::string message;
  std::string error_operation;
  std::string error_record;
  try {
    operation();
    FAIL("expected store_unavailable_error from " << what);
  } catch (const idem::store_unavailable_error& e) {
    message = e.what();
    error_operation = e.operation();
    error_record = e.record();
  }
  INFO("message: " << message);
  CHECK(message.find(what) != std::string::npos);
  CHECK(error_operation == what);  // as data, not only in the text
  CHECK(error_record == (id != nullptr ? id->to_string() : std::string()));
  if (id != nullptr) {
    CHECK(message.find(id->to_string()) != std::string::npos);
    CHECK(message.find(id->key()) == std::string::npos);
  }
}

// A login role for one test, dropped (with its grants) at the end.
class temporary_role {
 public:
  temporary_role() : name_(idem::pg_test::unique_name("idem_role")) {
    raw_connection conn;
    conn.query("CREATE ROLE " + name_ + " LOGIN");
    conn.query("GRANT SELECT, INSERT, UPDATE, DELETE ON idem_records TO " + name_);
  }
  ~temporary_role() {
    try {
      raw_connection conn;
      conn.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", {name_});
      conn.query("REVOKE ALL ON idem_records FROM " + name_);
      eventually(
          [&] { return conn.scalar("SELECT count(*) FROM pg_stat_activity WHERE usename = $1", {name_}) == "0"; }, 10s);
      conn.query("DROP ROLE IF EXISTS " + name_);
    } catch (...) {
      // Best effort: the fixture's server is thrown away after the run.
    }
  }
  temporary_role(const temporary_role&) = delete;
  temporary_role& operator=(const temporary_role&) = delete;
  const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
};

}  // namespace

TEST_CASE("failure: a database that is down answers store_unavailable_error at once", "[postgres][failure]") {
  const local_socket closed_port(false);  // bound, not listening: connections are refused
  auto o = store_options();
  o.conninfo = conninfo_for_port(closed_port.port());
  idem::postgres_store store{o};
  const auto id = new_id("Down.db");
  const idem::lease_token token = idem::lease_token::generate();

  const stopwatch watch;
  require_unavailable([&] { store.try_acquire(make_ctx(id, 10s)); }, "try_acquire", &id);
  require_unavailable([&] { store.complete(id, token, sample_payload(), 1h); }, "complete", &id);
  require_unavailable([&] { store.release(id, token); }, "release", &id);
  require_unavailable([&] { (void)store.extend(id, token, 30s); }, "extend", &id);
  require_unavailable([&] { store.purge_expired(); }, "purge_expired", nullptr);
  require_unavailable([&] { store.create_schema(); }, "create_schema", nullptr);
  // Refused connections fail fast: the 10 s wait is not spent waiting for a database that is gone.
  CHECK(watch.elapsed() < 5s);
}

TEST_CASE("failure: a server that never answers is bounded by operation_timeout", "[postgres][failure]") {
  const local_socket silent(true);  // accepts into its backlog, never says a word
  auto o = store_options();
  o.conninfo = conninfo_for_port(silent.port());
  o.operation_timeout = 300ms;
  idem::postgres_store store{o};
  const auto id = new_id("Stuck.db");

  stopwatch watch;
  require_unavailable([&] { store.try_acquire(make_ctx(id, 0ms)); }, "try_acquire", &id);
  CHECK(watch.elapsed() < 3s);
  watch = stopwatch();
  require_unavailable([&] { store.complete(id, idem::lease_token::generate(), sample_payload(), 1h); }, "complete",
                      &id);
  CHECK(watch.elapsed() < 3s);
}

TEST_CASE("failure: pooled connections the server killed are replaced", "[postgres][failure]") {
  idem::pg_test::ensure_schema();
  auto o = store_options("killed-pool");
  o.pool_size = 2;
  idem::postgres_store store{o};
  const auto first = new_id("Killed.pool");
  store.complete(first, require_acquired(store.try_acquire(make_ctx(first))), sample_payload(), 1h);
  const auto opened = store.statistics().connections_opened;
  REQUIRE(opened >= 1);

  raw_connection conn;
  const std::string mine = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1";
  REQUIRE(conn.scalar(mine, {o.application_name}) != "0");
  conn.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
             {o.application_name});
  REQUIRE(eventually([&] { return conn.scalar(mine, {o.application_name}) == "0"; }, 10s));

  // No call fails: the dead connections are noticed at checkout and replaced.
  const auto second = new_id("Killed.pool");
  const auto token = require_acquired(store.try_acquire(make_ctx(second)));
  store.complete(second, token, sample_payload(), 1h);
  CHECK(require_duplicate(store.try_acquire(make_ctx(first))).value == sample_payload());
  CHECK(store.statistics().connections_opened > opened);
}

TEST_CASE("failure: a killed LISTEN connection comes back and waiters are woken again", "[postgres][failure][notify]") {
  idem::pg_test::ensure_schema();
  auto o = store_options("killed-listener");
  o.fallback_recheck = 60s;  // prompt answers below come from notifications
  idem::postgres_store store{o};
  REQUIRE(eventually([&] { return store.listener_backend_pid() != 0; }, 10s));
  const int killed = store.listener_backend_pid();

  raw_connection conn;
  conn.query("SELECT pg_terminate_backend($1::int)", {std::to_string(killed)});
  REQUIRE(eventually([&] { return store.listener_backend_pid() != 0 && store.listener_backend_pid() != killed; }, 10s));
  CHECK(store.statistics().listener_connects >= 2);

  const auto id = new_id("Killed.listener");
  const auto token = require_acquired(store.try_acquire(make_ctx(id)));
  background<idem::acquire_result> waiter([&] { return store.try_acquire(make_ctx(id, 20s)); });
  CHECK_FALSE(waiter.finished_within(300ms));
  store.complete(id, token, sample_payload(), 1h);
  REQUIRE(waiter.finished_within(2s));
  require_duplicate(waiter.result());
}

TEST_CASE("failure: while the LISTEN connection cannot come back, waiters are answered by bounded re-checks",
          "[postgres][failure][notify]") {
  idem::pg_test::ensure_schema();
  const temporary_role role;
  auto o = store_options("no-listener");
  o.conninfo = idem::pg_test::conninfo() + " user=" + role.name();
  o.pool_size = 1;
  o.fallback_recheck = 50ms;
  idem::postgres_store store{o};
  // Open the one pooled connection while the role may still log in; it survives what follows.
  const auto warm = new_id("Fallback.recheck");
  store.complete(warm, require_acquired(store.try_acquire(make_ctx(warm))), sample_payload(), 1h);
  REQUIRE(eventually([&] { return store.listener_backend_pid() != 0; }, 10s));

  raw_connection conn;
  conn.query("ALTER ROLE " + role.name() + " NOLOGIN");
  conn.query("SELECT pg_terminate_backend($1::int)", {std::to_string(store.listener_backend_pid())});
  REQUIRE(eventually([&] { return store.listener_backend_pid() == 0; }, 10s));
  const auto connects = store.statistics().listener_connects;

  const auto id = new_id("Fallback.recheck");
  const auto token = require_acquired(store.try_acquire(make_ctx(id)));
  background<idem::acquire_result> waiter([&] { return store.try_acquire(make_ctx(id, 20s)); });
  CHECK_FALSE(waiter.finished_within(300ms));
  store.complete(id, token, sample_payload(), 1h);
  REQUIRE(waiter.finished_within(3s));
  CHECK(require_duplicate(waiter.result()).value == sample_payload());
  CHECK(store.statistics().listener_connects == connects);  // no notification could have done it

  // Once logging in works again, the listener is back by itself.
  conn.query("ALTER ROLE " + role.name() + " LOGIN");
  CHECK(eventually([&] { return store.listener_backend_pid() != 0; }, 10s));
}

TEST_CASE("failure: lost races, deadlocks and serialization failures answer in flight, not a store error",
          "[postgres][failure][race]") {
  private_schema schema("races");
  raw_connection conn{schema.conninfo()};
  // A trigger that makes every write of the claim fail the way a lost race does.
  conn.query(R"sql(
    CREATE FUNCTION lose_race() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'injected lost race' USING ERRCODE = TG_ARGV[0];
    END $$)sql");
  auto o = store_options();
  o.conninfo = schema.conninfo();
  idem::postgres_store store{o};

  for (const char* sqlstate : {"40P01", "40001", "23505"}) {
    INFO("SQLSTATE " << sqlstate);
    conn.query(std::string("CREATE TRIGGER lose_race BEFORE INSERT OR UPDATE ON idem_records FOR EACH ROW "
                           "EXECUTE FUNCTION lose_race('") +
               sqlstate + "')");
    const auto id = new_id("Race.lost");
    CHECK(require_in_flight(store.try_acquire(make_ctx(id, 0ms))).retry_after >= 0ms);
    const stopwatch watch;
    require_in_flight(store.try_acquire(make_ctx(id, 200ms)));
    CHECK(watch.elapsed() >= 150ms);
    CHECK(watch.elapsed() < 5s);
    conn.query("DROP TRIGGER lose_race ON idem_records");
    // With the trigger gone the same key is acquired: nothing was left behind.
    require_acquired(store.try_acquire(make_ctx(id, 0ms)));
  }
}

TEST_CASE("failure: a claim blocked by another session's row lock is bounded by the caller's wait",
          "[postgres][failure][race]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store{store_options()};
  const auto id = new_id("Locked.row");
  require_acquired(store.try_acquire(make_ctx(id, 0ms, 2ms)));
  raw_connection conn;
  const std::string expired =
      "SELECT count(*) FROM idem_records WHERE scope = $1 AND key_digest = "
      "sha256(convert_to($2, 'UTF8')) AND lease_expires_at < now()";
  REQUIRE(eventually([&] { return conn.scalar(expired, {id.scope(), id.key()}) == "1"; }, 5s));

  // Another session locks the record, so taking the expired lease over has to wait for the lock.
  conn.query("BEGIN");
  conn.query("SELECT 1 FROM idem_records WHERE scope = $1 AND key_digest = sha256(convert_to($2, 'UTF8')) FOR UPDATE",
             {id.scope(), id.key()});
  const stopwatch watch;
  require_in_flight(store.try_acquire(make_ctx(id, 300ms)));
  CHECK(watch.elapsed() >= 250ms);
  CHECK(watch.elapsed() < 5s);
  conn.query("ROLLBACK");
  require_acquired(store.try_acquire(make_ctx(id, 0ms)));
}
