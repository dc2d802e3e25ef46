// tests/postgres/required_coroutine.cpp — the coroutine's INSERT on the class's connection.
#include "required_coroutine.hpp"

#include <memory>

#include <libpq-fe.h>

namespace ledger_test {

void postgres_tab::insert(const std::string& id, long amount) {
  const std::string text = std::to_string(amount);
  const char* values[] = {id.c_str(), text.c_str()};
  const std::string sql = "INSERT INTO " + table_ + " (id, amount) VALUES ($1, $2::bigint)";
  const std::unique_ptr<PGresult, decltype(&PQclear)> r(
      PQexecParams(db_, sql.c_str(), 2, nullptr, values, nullptr, nullptr, 0), &PQclear);
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
    throw std::runtime_error(std::string("insert: ") + PQerrorMessage(db_));
}

}  // namespace ledger_test
