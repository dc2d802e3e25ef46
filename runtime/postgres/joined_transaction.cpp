// runtime/postgres/joined_transaction.cpp — completing a record inside the caller's
// idem::postgres_transaction, and the check that the transaction reaches the store's table.
#include <fmt/format.h>

#include <idem/deadline.hpp>
#include <idem/errors.hpp>
#include <idem/postgres_transaction.hpp>

#include "store_impl.hpp"

namespace idem {
namespace detail::pg {

database_identity read_identity(PGconn* conn, steady::time_point deadline, const canceller* cancel_on_timeout) {
  const param_list none;
  const result_ptr r = exec_params(conn, database_identity_sql, nullptr, none, deadline, cancel_on_timeout);
  if (PQntuples(r.get()) != 1 || PQnfields(r.get()) != 6)
    throw corrupt_record_error("postgres_store: unexpected answer to the question which database a connection is on");
  database_identity id;
  if (!is_null(r.get(), 0, 0)) id.system_identifier = get_int8(r.get(), 0, 0);
  id.started_us = get_int8(r.get(), 0, 1);
  id.database_oid = get_int8(r.get(), 0, 2);
  id.database = get_bytes(r.get(), 0, 3);
  id.table_oid = get_int8(r.get(), 0, 4);
  id.standby = get_bool(r.get(), 0, 5);
  return id;
}

}  // namespace detail::pg

using namespace detail::pg;

// What the store's own connections reach; read once, or again when `refresh` (the caller's
// transaction looked different: the database may have been restarted or moved since).
database_identity postgres_store::impl::store_identity(bool refresh) {
  std::lock_guard lock(identity_mutex);
  if (own_identity && !refresh) return *own_identity;
  const auto deadline = deadline_after(options.operation_timeout);
  try {
    auto c = pool.acquire(deadline);
    try {
      round_trips.fetch_add(1, std::memory_order_relaxed);
      own_identity = read_identity(c.get(), deadline, nullptr);
    } catch (const pg_error& e) {
      if (e.kind() != failure::server) c.mark_broken();
      throw;
    }
  } catch (const pg_error& e) {
    throw_unavailable("tell which database it writes to", {}, e);
  }
  return *own_identity;
}

void postgres_store::complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                                             milliseconds ttl, transaction& tx) {
  if (std::string problem = join_problem(tx); !problem.empty())
    throw configuration_error(
        fmt::format("postgres_store cannot complete {} inside this transaction: {}", id.to_string(), problem));
  auto* pg_tx = static_cast<postgres_transaction*>(&tx);

  const digest d = id.key_digest();
  const param_list p = complete_params(id, d, token, value, ttl);
  const statement& s = statement_for(statement_id::complete);
  result_ptr r;
  try {
    impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
    r = exec_params(pg_tx->connection(), s.sql, s.types.data(), p, deadline_after(impl_->options.operation_timeout),
                    &impl_->cancel_fn);
  } catch (const pg_error& e) {
    throw_unavailable("complete_in_transaction", id.to_string(), e,
                      "; the caller's transaction cannot commit and must roll back");
  }
  check_fenced(r.get(), "complete_in_transaction", id);
}

std::string postgres_store::join_problem(const transaction& tx) const {
  const auto* pg_tx = dynamic_cast<const postgres_transaction*>(&tx);
  if (pg_tx == nullptr)
    return "join-transaction completion needs an idem::postgres_transaction over the connection your business "
           "writes use; this transaction is of another type";
  if (!pg_tx->active()) return "the postgres_transaction already ended";
  PGconn* conn = pg_tx->connection();
  if (PQstatus(conn) != CONNECTION_OK) return "the postgres_transaction's connection is broken";
  if (PQtransactionStatus(conn) == PQTRANS_INERROR)
    return "the postgres_transaction has failed (a statement in it raised an error) and can only roll back";
  if (pg_tx->joined_store_ == impl_->instance) return {};  // checked already in this transaction

  database_identity theirs;
  try {
    impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
    theirs = read_identity(conn, deadline_after(impl_->options.operation_timeout), &impl_->cancel_fn);
  } catch (const pg_error& e) {
    throw_unavailable("tell which database the caller's transaction is on", {}, e,
                      "; the caller's transaction cannot commit and must roll back");
  }
  if (theirs.standby)
    return fmt::format("the postgres_transaction's connection is on a read-only standby (database \"{}\")",
                       theirs.database);
  if (theirs.table_oid == 0)
    return fmt::format("the postgres_transaction's connection (database \"{}\") finds no idem_records table on its "
                       "search_path",
                       theirs.database);
  database_identity ours = impl_->store_identity(false);
  if (!theirs.same_table(ours)) ours = impl_->store_identity(true);  // restarted or moved since?
  if (!theirs.same_cluster(ours))
    return fmt::format("the postgres_transaction's connection is on another PostgreSQL server (database \"{}\") than "
                       "the store's (database \"{}\")",
                       theirs.database, ours.database);
  if (theirs.database_oid != ours.database_oid)
    return fmt::format("the postgres_transaction's connection is on database \"{}\", the store's records are in "
                       "database \"{}\"",
                       theirs.database, ours.database);
  if (theirs.table_oid != ours.table_oid)
    return fmt::format("the postgres_transaction's connection reaches another idem_records table than the store's "
                       "(in database \"{}\": its search_path names another schema)",
                       theirs.database);
  pg_tx->joined_store_ = impl_->instance;
  return {};
}

bool postgres_store::extend_in_transaction(const identity& id, const lease_token& token, milliseconds lease,
                                           transaction& tx) {
  if (!join_problem(tx).empty()) return extend(id, token, lease);
  auto* pg_tx = static_cast<postgres_transaction*>(&tx);
  const digest d = id.key_digest();
  param_list p;
  p.text(id.scope()).bytes(d.data(), d.size()).uuid(token).int8(to_ms(lease));
  const std::array<Oid, 4> types{oid_text, oid_bytea, oid_uuid, oid_int8};
  result_ptr r;
  try {
    impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
    r = exec_params(pg_tx->connection(), extend_in_transaction_sql, types.data(), p,
                    deadline_after(impl_->options.operation_timeout), &impl_->cancel_fn);
  } catch (const pg_error& e) {
    throw_unavailable("extend_in_transaction", id.to_string(), e,
                      "; the caller's transaction cannot commit and must roll back");
  }
  return std::string_view(PQcmdTuples(r.get())) == "1";
}

}  // namespace idem
