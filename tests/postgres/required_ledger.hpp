// tests/postgres/required_ledger.hpp — a class whose method runs in a transaction its generated
// wrapper begins (transaction = "required") and writes its record inside it
// (completion = "join-transaction"), on the application's own PostgreSQL connection.
#pragma once

#include <functional>
#include <string>

#include <idem/json_codec.hpp>
#include <idem/postgres_transaction.hpp>

namespace ledger_test {

struct pg_entry {
  std::string id;
  long amount = 0;
  bool decline = false;  // post() throws after its write
};

class postgres_ledger {
 public:
  postgres_ledger(PGconn* db, std::string table) : db_(db), table_(std::move(table)) {}
  virtual ~postgres_ledger() = default;

  // Inserts the entry into the table and returns its amount.
  [[idem::idempotent(key = "e.id", completion = "join-transaction", transaction = "required",
                     lease = "PT1S", waitTimeout = "PT0S", codec = "idem::json_codec")]]
  virtual long post(const pg_entry& e);

  // Runs after post()'s write and before it returns (or throws), inside its transaction.
  std::function<void()> after_write;

 private:
  PGconn* db_;
  std::string table_;
};

}  // namespace ledger_test
