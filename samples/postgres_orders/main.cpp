// samples/postgres_orders — an order consumer that writes its business row and its idempotency
// record in ONE PostgreSQL transaction (completion_mode::join_transaction).
//
//   idem_sample_postgres_orders [conninfo]
//
// conninfo defaults to $IDEM_PG_CONNINFO, else $IDEM_PG_DIR/conninfo (as written by
// tests/support/postgres-server.sh start <dir>). The sample works in a schema of its own,
// idem_sample_orders, which it recreates on every run.
//
// What it shows:
//   1. A consumer process inserts the order and dies (a real process exit) before COMMIT: the
//      server rolls the transaction back, so neither the order nor a completed record exists. The
//      record stays "in progress" under the dead consumer's lease.
//   2. A redelivery right away is told "in flight" (retry after the lease); a redelivery that
//      waits takes the expired lease over and runs the consumer once.
//   3. A duplicate delivery is replayed: nothing is inserted twice.
//   4. A consumer that fails after its insert rolls back; the key is freed at once and the next
//      delivery runs.
// At no point can the order exist without its record, or the record without the order: they
// commit together or not at all.
#include <libpq-fe.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <idem/engine.hpp>
#include <idem/postgres_store.hpp>
#include <idem/postgres_transaction.hpp>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

extern char** environ;

namespace {

using namespace std::chrono_literals;

constexpr const char* schema = "idem_sample_orders";
constexpr auto lease = 2s;

struct order_placed {
  std::string id;
  std::string item;
  int quantity;
};

std::string default_conninfo() {
  if (const char* c = std::getenv("IDEM_PG_CONNINFO"); c != nullptr && *c != '\0') return c;
  if (const char* dir = std::getenv("IDEM_PG_DIR"); dir != nullptr && *dir != '\0') {
    std::ifstream in(std::string(dir) + "/conninfo");
    std::string line;
    if (std::getline(in, line)) return line;
  }
  return {};
}

// The application's own connection, as it would have one anyway.
class app_connection {
 public:
  explicit app_connection(const std::string& conninfo) : conn_(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string message = PQerrorMessage(conn_);
      PQfinish(conn_);
      throw std::runtime_error("cannot connect: " + message);
    }
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
  }
  ~app_connection() { PQfinish(conn_); }
  app_connection(const app_connection&) = delete;
  app_connection& operator=(const app_connection&) = delete;
  PGconn* get() const noexcept { return conn_; }

  std::string query(const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* r =
        PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0);
    const auto status = PQresultStatus(r);
    std::string value = (status == PGRES_TUPLES_OK && PQntuples(r) > 0) ? PQgetvalue(r, 0, 0) : "";
    std::string message = PQresultErrorMessage(r);
    PQclear(r);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) throw std::runtime_error(message);
    return value;
  }

 private:
  PGconn* conn_;
};

std::string with_schema(const std::string& conninfo) {
  return conninfo + " options='-csearch_path=" + schema + "'";
}

// The consumer: inserts the order on the transaction's connection, through the engine.
class order_consumer {
 public:
  order_consumer(idem::engine& engine, app_connection& conn) : engine_(engine), conn_(conn) {}

  // Handles one delivery inside `tx`. `wait`: how long a duplicate waits for a holder.
  idem::outcome<void> on_order(const order_placed& order, std::chrono::milliseconds wait) {
    const auto ctx =
        engine_.make_context("OrderConsumer.on_order", order.id,
                             {.lease = lease, .wait = wait, .completion = idem::completion_mode::join_transaction});
    return engine_.execute(ctx, [&] {
      conn_.query("INSERT INTO orders (id, item, quantity) VALUES ($1, $2, $3)",
                  {order.id, order.item, std::to_string(order.quantity)});
    });
  }

 private:
  idem::engine& engine_;
  app_connection& conn_;
};

const char* describe(const idem::outcome<void>& o) {
  if (std::holds_alternative<idem::executed<void>>(o)) return "executed";
  if (std::holds_alternative<idem::replayed<void>>(o)) return "replayed (nothing inserted)";
  return "in flight";
}

void show_state(app_connection& conn, const order_placed& order) {
  const std::string orders = conn.query("SELECT count(*) FROM orders WHERE id = $1", {order.id});
  const std::string record = conn.query(
      "SELECT coalesce(max(status), 'absent') FROM idem_records WHERE scope = 'OrderConsumer.on_order' AND "
      "key_digest = sha256(convert_to($1, 'UTF8'))",
      {order.id});
  std::printf("      state: %s order row(s) for %s, idempotency record %s\n", orders.c_str(), order.id.c_str(),
              record.c_str());
}

// Child process: handle the delivery, then die before COMMIT, as a consumer killed mid-flight.
int crash_worker(const std::string& conninfo, const std::string& order_id) {
  idem::postgres_store store{{.conninfo = with_schema(conninfo), .pool_size = 1, .log = nullptr}};
  idem::engine engine{store};
  app_connection conn{with_schema(conninfo)};
  order_consumer consumer{engine, conn};
  idem::postgres_transaction tx{conn.get()};
  (void)consumer.on_order({order_id, "espresso beans", 3}, 0ms);
  std::_Exit(3);  // no COMMIT, no destructors: the process is gone
}

int run(const std::string& conninfo, const char* self) {
  {
    app_connection admin{conninfo};
    admin.query(std::string("DROP SCHEMA IF EXISTS ") + schema + " CASCADE");
    admin.query(std::string("CREATE SCHEMA ") + schema);
  }
  idem::postgres_store store{{.conninfo = with_schema(conninfo)}};
  store.create_schema();
  app_connection conn{with_schema(conninfo)};
  conn.query("CREATE TABLE orders (id text PRIMARY KEY, item text NOT NULL, quantity int NOT NULL)");
  idem::engine engine{store};
  order_consumer consumer{engine, conn};
  const order_placed order{"order-1001", "espresso beans", 3};

  std::printf("postgres_orders: the order row and the idempotency record commit in one transaction\n\n");

  std::printf("1. delivery: a consumer process inserts %s and dies before COMMIT\n", order.id.c_str());
  pid_t child = 0;
  std::vector<std::string> args{self, "--crash-worker", conninfo, order.id};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("cannot start the consumer process");
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("      the consumer process exited with status %d before committing\n",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  show_state(conn, order);
  std::printf("      -> no order and no completed record: the server rolled the transaction back\n\n");

  std::printf("2. redelivery at once (wait 0): ");
  {
    idem::postgres_transaction tx{conn.get()};
    const auto o = consumer.on_order(order, 0ms);
    std::printf("%s", describe(o));
    if (const auto* f = std::get_if<idem::in_flight>(&o))
      std::printf(", retry after %lld ms (the dead consumer's lease)", static_cast<long long>(f->retry_after.count()));
    std::printf("\n");
  }
  std::printf("   redelivery that waits up to 10 s: ");
  {
    idem::postgres_transaction tx{conn.get()};
    const auto o = consumer.on_order(order, 10s);
    tx.commit();
    std::printf("%s after the lease expired, committed\n", describe(o));
  }
  show_state(conn, order);
  std::printf("\n");

  std::printf("3. duplicate delivery: ");
  {
    idem::postgres_transaction tx{conn.get()};
    const auto o = consumer.on_order(order, 10s);
    tx.commit();
    std::printf("%s\n", describe(o));
  }
  show_state(conn, order);
  std::printf("\n");

  const order_placed second{"order-1002", "filter papers", 1};
  std::printf("4. delivery of %s that fails after its insert (an exception before COMMIT)\n", second.id.c_str());
  try {
    idem::postgres_transaction tx{conn.get()};
    (void)consumer.on_order(second, 0ms);
    throw std::runtime_error("payment service unavailable");
  } catch (const std::runtime_error& e) {
    std::printf("      failed: %s; the transaction rolled back\n", e.what());
  }
  show_state(conn, second);
  std::printf("   next delivery: ");
  {
    idem::postgres_transaction tx{conn.get()};
    const auto o = consumer.on_order(second, 0ms);
    tx.commit();
    std::printf("%s, committed\n", describe(o));
  }
  show_state(conn, second);

  const std::string total = conn.query("SELECT count(*) FROM orders");
  std::printf("\n%s orders in the table for 2 orders and 6 deliveries: each ran exactly once\n", total.c_str());
  {
    app_connection admin{conninfo};
    admin.query(std::string("DROP SCHEMA IF EXISTS ") + schema + " CASCADE");
  }
  return total == "2" ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::string(argv[1]) == "--crash-worker") return crash_worker(argv[2], argv[3]);
    const std::string conninfo = argc > 1 ? argv[1] : default_conninfo();
    if (conninfo.empty()) {
      std::fprintf(stderr,
                   "usage: %s <conninfo>\n  (or set IDEM_PG_CONNINFO, or IDEM_PG_DIR as written by "
                   "tests/support/postgres-server.sh start <dir>)\n",
                   argv[0]);
      return 2;
    }
    return run(conninfo, argv[0]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "postgres_orders: %s\n", e.what());
    return 1;
  }
}
