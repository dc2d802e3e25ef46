// tests/sqlite/required_ledger.hpp — a class whose method runs in a transaction its generated
// wrapper begins (transaction = "required") and writes its record inside it
// (completion = "join-transaction"), on the application's own SQLite connection.
#pragma once

#include <functional>
#include <string>

#include <idem/json_codec.hpp>
#include <idem/sqlite_transaction.hpp>

namespace ledger_test {

struct entry {
  std::string id;
  long amount = 0;
  bool decline = false;  // post() throws after its write
};

class sqlite_ledger {
 public:
  explicit sqlite_ledger(sqlite3* db) : db_(db) {}
  virtual ~sqlite_ledger() = default;

  // Inserts the entry into `entries` and returns its amount.
  [[idem::idempotent(key = "e.id", completion = "join-transaction", transaction = "required",
                     lease = "PT1S", waitTimeout = "PT0S", codec = "idem::json_codec")]]
  virtual long post(const entry& e);

  // Run inside post()'s transaction: before its write, and after it (before it returns or throws).
  std::function<void()> before_write;
  std::function<void()> after_write;

 private:
  sqlite3* db_;
};

}  // namespace ledger_test
