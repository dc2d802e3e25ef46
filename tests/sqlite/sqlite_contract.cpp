// tests/sqlite/sqlite_contract.cpp — instantiates the store contract and the transactional
// contract for idem::sqlite_store. Every store the contract asks for gets a file of its own.
#include <idem/sqlite_store.hpp>
#include <idem/sqlite_transaction.hpp>
#include <memory>

#include <idem/testing/async_bridge.hpp>
#include <idem/testing/store_contract.hpp>
#include "sqlite_test_support.hpp"

namespace idem::contract {
namespace {

// A transaction on an application connection of its own, on the harness's file.
class sqlite_contract_transaction final : public contract_transaction {
 public:
  explicit sqlite_contract_transaction(const std::filesystem::path& path)
      : db_(sqlite_test::open_connection(path)), tx_(db_.get()) {}

  idem::transaction& get() override { return tx_; }
  void commit() override { tx_.commit(); }
  void rollback() override { tx_.rollback(); }

 private:
  sqlite_test::connection db_;  // declared first: outlives the transaction
  idem::sqlite_transaction tx_;
};

class sqlite_harness final : public transactional_harness {
 public:
  sqlite_harness() : path_(sqlite_test::fresh_db_path("transactional")), store_(sqlite_test::options_for(path_)) {}

  idem::store& store() override { return store_; }
  std::unique_ptr<contract_transaction> begin() override {
    return std::make_unique<sqlite_contract_transaction>(path_);
  }

 private:
  std::filesystem::path path_;
  idem::sqlite_store store_;
};

}  // namespace

std::unique_ptr<idem::store> make_store() {
  set_backend_exclusive(true);  // a new file for every case
  return entry_point(std::make_unique<idem::sqlite_store>(sqlite_test::options_for(sqlite_test::fresh_db_path("contract"))));
}

std::unique_ptr<transactional_harness> make_transactional_harness() {
  return std::make_unique<sqlite_harness>();
}

}  // namespace idem::contract
