// idem/postgres_transaction.hpp — an RAII PostgreSQL transaction on your own connection that
// idem can take part in (target idem::postgres).
//
//   PGconn* conn = ...;                                  // the connection your business code uses
//   {
//     idem::postgres_transaction tx{conn};               // BEGIN; bound to this thread
//     auto ctx = engine.make_context("Orders.place", msg.id,
//                                    {.completion = idem::completion_mode::join_transaction});
//     engine.execute(ctx, [&] { insert_order(tx.connection(), msg); });
//     tx.commit();                                       // the order row and the record, together
//   }                                                    // not committed: ROLLBACK, key freed
//
// While it lives, the transaction is idem::current_transaction() on the thread that created it.
// With join_transaction the engine writes the record through postgres_store::complete_in_transaction
// on this connection; with autonomous completion the record is written after the commit on the
// store's own connection, and a rollback releases it.
#pragma once

#include <optional>

#include <idem/transaction.hpp>

// libpq's connection type, declared the way <libpq-fe.h> declares it, so that this header does not
// make every includer find libpq's headers.
typedef struct pg_conn PGconn;

namespace idem {

// idem::postgres_transaction
//
// Not copyable or movable; create and destroy it on one thread, innermost first (it holds an
// idem::transaction_binding). The connection must outlive it, must be used by this thread only
// while it lives, and must reach the same database (and search_path) as the postgres_store.
class postgres_transaction final : public basic_transaction {
 public:
  // Sends BEGIN on `connection` and binds the transaction to the calling thread. Throws
  // configuration_error if `connection` is null, not connected or already inside a transaction,
  // and store_unavailable_error if BEGIN fails.
  explicit postgres_transaction(PGconn* connection);
  // The same, bound to no thread: for a coroutine, which hands it to idem::async_execute.
  postgres_transaction(PGconn* connection, unbound_t);
  // Rolls back if neither commit() nor rollback() ran. Never throws.
  ~postgres_transaction() override;
  postgres_transaction(const postgres_transaction&) = delete;
  postgres_transaction& operator=(const postgres_transaction&) = delete;

  // Runs the before-commit checks (one that throws rolls back, and its exception propagates),
  // sends COMMIT and then runs the after-commit callbacks. If the transaction cannot commit (it
  // had failed, the server refused, or the connection broke so the outcome is unknown), runs the
  // after-rollback callbacks instead and throws store_unavailable_error. Throws idem::error if
  // the transaction already ended.
  void commit();

  // Sends ROLLBACK (a broken connection rolls back on the server by itself) and runs the
  // after-rollback callbacks. A no-op once the transaction ended. Never throws.
  void rollback() noexcept;

  // The connection the transaction runs on, for the caller's own statements.
  PGconn* connection() const noexcept { return connection_; }

 private:
  friend class postgres_store;
  static PGconn* begin(PGconn* connection);

  PGconn* connection_;
  std::optional<transaction_binding> binding_;  // empty when unbound
  // The postgres_store (its instance number) that last found this connection on its table: the
  // connection cannot change server or database while the transaction lives, so that store's later
  // checks of the same transaction skip the round trip. 0 = none yet.
  mutable unsigned long long joined_store_ = 0;
};

// BEGIN, COMMIT and ROLLBACK are round trips to the server: a coroutine's run off its thread.
template <>
struct is_blocking_transaction<postgres_transaction> : std::true_type {};

// idem::postgres_transaction_source
//
// Begins a postgres_transaction on one connection for each call of a method annotated with
// transaction = "required" (see idem::transaction_source): give the same connection to the class,
// whose body then writes through it inside that transaction. Used by one thread at a time, as the
// connection is.
using postgres_transaction_source = basic_transaction_source<postgres_transaction, PGconn*>;

}  // namespace idem
