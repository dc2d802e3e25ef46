// tests/postgres/postgres_contract.cpp — idem::postgres_store runs the store contract and the
// transactional contract against the fixture's PostgreSQL server.
//
// Every case gets a new store (pool, LISTEN connection) on a PostgreSQL schema of its own: ctest
// runs cases in parallel against one server, and a purge in one case would otherwise delete the
// expired records another case is about to count. So the backend is exclusive and purge counts
// are checked exactly. The schemas are dropped when the process exits.
#include <idem/postgres_store.hpp>
#include <idem/postgres_transaction.hpp>
#include <memory>
#include <mutex>
#include <vector>

#include <idem/testing/async_bridge.hpp>
#include <idem/testing/store_contract.hpp>
#include "postgres_test_support.hpp"

namespace {

using idem::pg_test::private_schema;
using idem::pg_test::raw_connection;

// A new schema with the idem objects in it, kept until the process exits.
const private_schema& fresh_schema() {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<private_schema>> schemas;
  auto schema = std::make_unique<private_schema>("contract");
  std::lock_guard lock{mutex};
  schemas.push_back(std::move(schema));
  return *schemas.back();
}

idem::postgres_store_options options_for(const private_schema& schema) {
  auto o = idem::pg_test::store_options("contract");
  o.conninfo = schema.conninfo();
  return o;
}

class pg_contract_transaction final : public idem::contract::contract_transaction {
 public:
  explicit pg_contract_transaction(PGconn* conn) : tx_(conn) {}
  idem::transaction& get() override { return tx_; }
  void commit() override { tx_.commit(); }
  void rollback() override { tx_.rollback(); }

 private:
  idem::postgres_transaction tx_;
};

// The store plus the caller's own connection, on which the transactions run.
class pg_harness final : public idem::contract::transactional_harness {
 public:
  explicit pg_harness(const private_schema& schema) : store_(options_for(schema)), connection_(schema.conninfo()) {}
  idem::store& store() override { return store_; }
  std::unique_ptr<idem::contract::contract_transaction> begin() override {
    return std::make_unique<pg_contract_transaction>(connection_.get());
  }

 private:
  idem::postgres_store store_;
  raw_connection connection_;
};

}  // namespace

std::unique_ptr<idem::store> idem::contract::make_store() {
  set_backend_exclusive(true);
  return entry_point(std::make_unique<idem::postgres_store>(options_for(fresh_schema())));
}

std::unique_ptr<idem::contract::transactional_harness> idem::contract::make_transactional_harness() {
  set_backend_exclusive(true);
  return std::make_unique<pg_harness>(fresh_schema());
}
