// runtime/postgres/postgres_transaction.cpp — idem::postgres_transaction.
#include <idem/errors.hpp>
#include <idem/postgres_transaction.hpp>
#include <string>
#include <string_view>

#include "pg_connection.hpp"

namespace idem {
namespace {

std::string message_of(PGconn* conn, const PGresult* r) {
  const char* text = r != nullptr ? PQresultErrorMessage(r) : "";
  std::string s = (text != nullptr && text[0] != '\0') ? text : PQerrorMessage(conn);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? std::string("no message from libpq") : s;
}

}  // namespace

PGconn* postgres_transaction::begin(PGconn* connection) {
  if (connection == nullptr) throw configuration_error("postgres_transaction needs a connection; got a null PGconn*");
  if (PQstatus(connection) != CONNECTION_OK)
    throw configuration_error("postgres_transaction needs an open connection; this one is not connected");
  if (PQtransactionStatus(connection) != PQTRANS_IDLE)
    throw configuration_error(
        "postgres_transaction needs a connection outside any transaction; this one is busy or already inside one");
  detail::pg::result_ptr r{PQexec(connection, "BEGIN")};
  if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK)
    throw store_unavailable_error("postgres_transaction: BEGIN failed: " + message_of(connection, r.get()));
  return connection;
}

postgres_transaction::postgres_transaction(PGconn* connection) : postgres_transaction(connection, unbound) {
  binding_.emplace(*this);
}

postgres_transaction::postgres_transaction(PGconn* connection, unbound_t) : connection_(begin(connection)) {}

postgres_transaction::~postgres_transaction() {
  rollback();
}

void postgres_transaction::commit() {
  if (!active()) throw error("postgres_transaction::commit: the transaction already ended");
  try {
    prepare_commit();
  } catch (...) {
    rollback();
    throw;
  }
  detail::pg::result_ptr r{PQexec(connection_, "COMMIT")};
  // COMMIT of a transaction that had failed succeeds with the tag ROLLBACK.
  if (r && PQresultStatus(r.get()) == PGRES_COMMAND_OK && std::string_view(PQcmdStatus(r.get())) == "COMMIT") {
    finish_commit();
    return;
  }
  std::string reason;
  if (r && PQresultStatus(r.get()) == PGRES_COMMAND_OK) {
    reason = "the transaction had failed earlier and was rolled back";
  } else if (PQstatus(connection_) != CONNECTION_OK) {
    reason = "the connection broke, so the outcome is unknown; it counts as rolled back: " +
             message_of(connection_, r.get());
  } else {
    reason = "the server refused it and rolled back: " + message_of(connection_, r.get());
  }
  // Leave the connection usable if the server still thinks a transaction is open.
  if (PQtransactionStatus(connection_) == PQTRANS_INTRANS || PQtransactionStatus(connection_) == PQTRANS_INERROR)
    detail::pg::result_ptr{PQexec(connection_, "ROLLBACK")};
  finish_rollback();
  throw store_unavailable_error("postgres_transaction: COMMIT did not commit: " + reason);
}

void postgres_transaction::rollback() noexcept {
  if (!active()) return;
  // On a broken connection the server rolls back by itself; either way the transaction is over.
  if (PQstatus(connection_) == CONNECTION_OK) detail::pg::result_ptr{PQexec(connection_, "ROLLBACK")};
  finish_rollback();
}

}  // namespace idem
