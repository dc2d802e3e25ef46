// tests/postgres/required_ledger.cpp — the business body: one INSERT on the class's connection.
#include "required_ledger.hpp"

#include <memory>
#include <stdexcept>

#include <libpq-fe.h>

namespace ledger_test {

long postgres_ledger::post(const pg_entry& e) {
  const std::string amount = std::to_string(e.amount);
  const char* values[] = {e.id.c_str(), amount.c_str()};
  const std::string sql = "INSERT INTO " + table_ + " (id, amount) VALUES ($1, $2::bigint)";
  const std::unique_ptr<PGresult, decltype(&PQclear)> r(
      PQexecParams(db_, sql.c_str(), 2, nullptr, values, nullptr, nullptr, 0), &PQclear);
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
    throw std::runtime_error(std::string("insert: ") + PQerrorMessage(db_));
  if (after_write) after_write();
  if (e.decline) throw std::runtime_error("declined");
  return e.amount;
}

}  // namespace ledger_test
