// tests/sqlite/required_ledger.cpp — the business body: one INSERT on the class's connection.
#include "required_ledger.hpp"

#include <stdexcept>

#include <sqlite3.h>

namespace ledger_test {

long sqlite_ledger::post(const entry& e) {
  if (before_write) before_write();
  sqlite3_stmt* insert = nullptr;
  if (sqlite3_prepare_v2(db_, "INSERT INTO entries (id, amount) VALUES (?1, ?2)", -1, &insert, nullptr) != SQLITE_OK)
    throw std::runtime_error(std::string("prepare: ") + sqlite3_errmsg(db_));
  sqlite3_bind_text(insert, 1, e.id.c_str(), static_cast<int>(e.id.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(insert, 2, e.amount);
  const int rc = sqlite3_step(insert);
  sqlite3_finalize(insert);
  if (rc != SQLITE_DONE) throw std::runtime_error(std::string("insert: ") + sqlite3_errmsg(db_));
  if (after_write) after_write();
  if (e.decline) throw std::runtime_error("declined");
  return e.amount;
}

}  // namespace ledger_test
