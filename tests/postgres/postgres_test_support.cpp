// tests/postgres/postgres_test_support.cpp
#include "postgres_test_support.hpp"

#include <idem/testing/store_contract.hpp>

#include <cstdlib>
#include <fstream>
#include <idem/lease_token.hpp>
#include <mutex>
#include <stdexcept>

#ifdef IDEM_PG_TEST_EVENT_LOOP
#include "support/shared_io.hpp"
#endif

namespace idem::pg_test {


const std::string& conninfo() {
  static const std::string value = [] {
    const char* dir = std::getenv("IDEM_PG_DIR");
    if (dir == nullptr || *dir == '\0')
      throw std::runtime_error(
          "IDEM_PG_DIR is not set: run the PostgreSQL tests through ctest (fixture \"postgres\"), or start a "
          "server with tests/support/postgres-server.sh start <dir> and export IDEM_PG_DIR=<dir>");
    std::ifstream in(std::string(dir) + "/conninfo");
    std::string line;
    if (!in || !std::getline(in, line) || line.empty())
      throw std::runtime_error(std::string("no conninfo in ") + dir +
                               "/conninfo: the PostgreSQL fixture did not start (see postgres/server-start)");
    return line;
  }();
  return value;
}

std::string conninfo_with_schema(const std::string& base, std::string_view schema) {
  return base + " options='-csearch_path=" + std::string(schema) + "'";
}

std::string unique_name(std::string_view hint) {
  std::string name(hint);
  name += '_';
  name += idem::lease_token::generate().to_string().substr(0, 12);
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

idem::postgres_store_options store_options(std::string_view hint) {
  idem::postgres_store_options o;
  o.conninfo = conninfo();
  o.application_name = unique_name(hint);
  o.log = nullptr;
#ifdef IDEM_PG_TEST_EVENT_LOOP
  o.event_loop = idem::test::shared_test_event_loop();
#endif
  return o;
}

void ensure_schema() {
  static std::once_flag once;
  std::call_once(once, [] {
    idem::postgres_store store{store_options("schema")};
    store.create_schema();
  });
}

raw_connection::raw_connection(const std::string& info) : conn_(PQconnectdb(info.c_str())) {
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn_);
    PQfinish(conn_);
    throw std::runtime_error("cannot connect to the test server: " + message);
  }
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
}

raw_connection::~raw_connection() {
  PQfinish(conn_);
}

std::vector<std::vector<std::string>> raw_connection::query(const std::string& sql,
                                                            const std::vector<std::string>& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  PGresult* r =
      PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0);
  const auto status = PQresultStatus(r);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    std::string message = PQresultErrorMessage(r);
    PQclear(r);
    throw std::runtime_error("test statement failed: " + message + " in: " + sql);
  }
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < PQntuples(r); ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < PQnfields(r); ++j) row.emplace_back(PQgetvalue(r, i, j));
    rows.push_back(std::move(row));
  }
  PQclear(r);
  return rows;
}

std::string raw_connection::scalar(const std::string& sql, const std::vector<std::string>& params) {
  auto rows = query(sql, params);
  if (rows.empty() || rows[0].empty()) throw std::runtime_error("no value from: " + sql);
  return rows[0][0];
}

private_schema::private_schema(std::string_view hint)
    : name_(unique_name(hint)), conninfo_(conninfo_with_schema(pg_test::conninfo(), name_)) {
  raw_connection{}.query("CREATE SCHEMA " + name_);
  idem::postgres_store_options o = store_options(hint);
  o.conninfo = conninfo_;
  idem::postgres_store store{o};
  store.create_schema();
}

private_schema::~private_schema() {
  try {
    // conninfo_, not pg_test::conninfo(): this may run during static destruction.
    raw_connection{conninfo_}.query("DROP SCHEMA IF EXISTS " + name_ + " CASCADE");
  } catch (...) {
    // Best effort: the fixture's server is thrown away after the run.
  }
}

idem::context make_ctx(const idem::identity& id, std::chrono::milliseconds wait, std::chrono::milliseconds lease,
                       std::chrono::milliseconds ttl) {
  idem::context ctx{.id = id, .ttl = ttl, .lease = lease, .wait = wait};
  ctx.validate();
  return ctx;
}

idem::identity new_id(std::string_view scope, std::string_view hint) {
  return idem::identity(std::string(scope), idem::contract::unique_key(hint));
}

}  // namespace idem::pg_test
