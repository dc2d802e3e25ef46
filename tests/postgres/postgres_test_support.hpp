// tests/postgres/postgres_test_support.hpp — the PostgreSQL server the fixture started, and raw
// libpq access to it for checks the store's API does not offer.
#pragma once

#include <libpq-fe.h>

#include <idem/context.hpp>
#include <idem/identity.hpp>

#include <chrono>
#include <functional>
#include <idem/postgres_store.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/eventually.hpp"

namespace idem::pg_test {

// The conninfo the fixture wrote to $IDEM_PG_DIR/conninfo. Throws std::runtime_error (failing the
// case) if the variable or the file is missing: the tests never skip.
const std::string& conninfo();

// `base` with `options='-csearch_path=<schema>'` appended.
std::string conninfo_with_schema(const std::string& base, std::string_view schema);

// A name no other case (or run) uses: `hint` plus random hex, lowercase, usable as an SQL name.
std::string unique_name(std::string_view hint);

// Store options for the fixture's server with a unique application_name and a silent log.
idem::postgres_store_options store_options(std::string_view hint = "idem-test");

// Creates the schema in the fixture's database once per process.
void ensure_schema();

// For conditions no event announces (a server process exiting): tests/support/eventually.hpp.
using idem::test::eventually;

// A plain libpq connection for test-side statements.
class raw_connection {
 public:
  explicit raw_connection(const std::string& conninfo = pg_test::conninfo());
  ~raw_connection();
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  PGconn* get() const noexcept { return conn_; }
  // Runs `sql` with text parameters; returns the rows as text (NULL as ""). Throws
  // std::runtime_error with the server's message on failure.
  std::vector<std::vector<std::string>> query(const std::string& sql, const std::vector<std::string>& params = {});
  // The first column of the first row.
  std::string scalar(const std::string& sql, const std::vector<std::string>& params = {});

 private:
  PGconn* conn_;
};

// A PostgreSQL schema of its own, created in the constructor (with the idem objects in it) and
// dropped in the destructor, for tests that change the table (triggers) or count exactly.
class private_schema {
 public:
  explicit private_schema(std::string_view hint);
  ~private_schema();
  private_schema(const private_schema&) = delete;
  private_schema& operator=(const private_schema&) = delete;

  const std::string& name() const noexcept { return name_; }
  // The fixture's conninfo with search_path set to this schema.
  const std::string& conninfo() const noexcept { return conninfo_; }

 private:
  std::string name_;
  std::string conninfo_;
};

// A validated context for `id` (ttl 1 h unless given).
idem::context make_ctx(const idem::identity& id, std::chrono::milliseconds wait = std::chrono::seconds(5),
                       std::chrono::milliseconds lease = std::chrono::seconds(30),
                       std::chrono::milliseconds ttl = std::chrono::hours(1));

// An identity in `scope` with a key no other test uses.
idem::identity new_id(std::string_view scope, std::string_view hint = "k");

}  // namespace idem::pg_test
