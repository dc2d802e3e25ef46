// runtime/sqlite/sqlite_transaction.cpp — idem::sqlite_transaction.
#include <sqlite3.h>

#include <idem/errors.hpp>
#include <idem/sqlite_transaction.hpp>
#include <string>

namespace idem {

namespace {

std::string sqlite_reason(sqlite3* db, int rc) {
  return std::string(sqlite3_errmsg(db)) + " (SQLite error " + std::to_string(rc) + ")";
}

}  // namespace

sqlite_transaction::sqlite_transaction(sqlite3* db) : sqlite_transaction(db, unbound) { binding_.emplace(*this); }

sqlite_transaction::sqlite_transaction(sqlite3* db, unbound_t) : db_(db) {
  if (db_ == nullptr) throw configuration_error("sqlite_transaction: the connection is null");
  if (sqlite3_get_autocommit(db_) == 0)
    throw configuration_error("sqlite_transaction: the connection is already inside a transaction");
  if (int rc = sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr); rc != SQLITE_OK)
    throw store_unavailable_error("sqlite_transaction: BEGIN failed: " + sqlite_reason(db_, rc));
}

sqlite_transaction::~sqlite_transaction() {
  rollback();
}

bool sqlite_transaction::active() const {
  return basic_transaction::active() && sqlite3_get_autocommit(db_) == 0;
}

void sqlite_transaction::commit() {
  if (!basic_transaction::active()) throw configuration_error("sqlite_transaction: commit after the transaction ended");
  if (sqlite3_get_autocommit(db_) != 0) {
    // SQLite already rolled it back (or the application ended it behind our back).
    finish_rollback();
    throw store_unavailable_error("sqlite_transaction: cannot commit: SQLite already ended the transaction");
  }
  try {
    prepare_commit();
  } catch (...) {
    rollback();
    throw;
  }
  if (int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr); rc != SQLITE_OK) {
    const std::string reason = sqlite_reason(db_, rc);
    if (sqlite3_get_autocommit(db_) != 0) finish_rollback();
    throw store_unavailable_error("sqlite_transaction: COMMIT failed: " + reason);
  }
  finish_commit();
}

void sqlite_transaction::rollback() noexcept {
  if (!basic_transaction::active()) return;
  if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  finish_rollback();
}

}  // namespace idem
