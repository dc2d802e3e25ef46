// tests/sqlite/required_coroutine.cpp — the coroutine's INSERT on the class's connection.
#include "required_coroutine.hpp"

#include <sqlite3.h>

namespace ledger_test {

void sqlite_tab::insert(const std::string& id, long amount) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db_, "INSERT INTO entries (id, amount) VALUES (?1, ?2)", -1, &statement, nullptr) != SQLITE_OK)
    throw std::runtime_error(std::string("prepare: ") + sqlite3_errmsg(db_));
  sqlite3_bind_text(statement, 1, id.c_str(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(statement, 2, amount);
  const int rc = sqlite3_step(statement);
  sqlite3_finalize(statement);
  if (rc != SQLITE_DONE) throw std::runtime_error(std::string("insert: ") + sqlite3_errmsg(db_));
}

}  // namespace ledger_test
