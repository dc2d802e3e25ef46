// idem/sqlite_transaction.hpp — an RAII transaction over the application's own SQLite connection.
//
//   sqlite3* db = ...;                        // the application's connection to the store's file
//   idem::sqlite_transaction tx{db};          // BEGIN, and bound to this thread
//   listener.on(event);                       // idem sees tx through idem::current_transaction()
//   tx.commit();                              // COMMIT; a destructor without commit rolls back
//
// Under autonomous completion the engine completes the record after the commit; under
// join-transaction sqlite_store::complete_in_transaction writes it inside tx, so the record and
// the business writes commit or roll back together. A rollback releases the record.
//
// SQLite has one writer per file: once tx has written it holds the write lock until it ends.
// Call idempotent functions before the transaction's first statement (their claim must commit on
// the store's connection first), see docs/stores/sqlite.md.
#pragma once

#include <optional>

#include <idem/transaction.hpp>

struct sqlite3;

namespace idem {

// idem::sqlite_transaction
//
// A DEFERRED transaction on a connection the caller owns (never closed by idem). Bound to the
// constructing thread for its lifetime: construct, commit and destroy it on one thread, and destroy
// nested ones in reverse order. Not copyable or movable.
class sqlite_transaction final : public basic_transaction {
 public:
  // Runs BEGIN on `db`. Throws configuration_error if `db` is null or already inside a
  // transaction, store_unavailable_error if BEGIN fails.
  explicit sqlite_transaction(sqlite3* db);
  // The same, bound to no thread: for a coroutine, which hands it to idem::async_execute.
  sqlite_transaction(sqlite3* db, unbound_t);
  // Rolls back if still active and runs the after_rollback callbacks. Never throws.
  ~sqlite_transaction() override;
  sqlite_transaction(const sqlite_transaction&) = delete;
  sqlite_transaction& operator=(const sqlite_transaction&) = delete;

  // True until commit or rollback, and while SQLite has not ended the transaction on its own
  // (some errors, such as SQLITE_FULL, roll it back).
  bool active() const override;

  // Runs the before-commit checks, COMMIT, then the after_commit callbacks. Throws
  // configuration_error if the transaction is no longer active. A check that throws rolls the
  // transaction back and its exception propagates. If COMMIT fails it throws store_unavailable_error with SQLite's reason; the
  // transaction is then still active (SQLITE_BUSY: commit may be retried) or, if SQLite rolled it
  // back, finished as a rollback.
  void commit();

  // Runs ROLLBACK, then the after_rollback callbacks. A no-op if no longer active. Never throws.
  void rollback() noexcept;

  // The wrapped connection.
  sqlite3* connection() const noexcept { return db_; }

 private:
  sqlite3* db_;
  std::optional<transaction_binding> binding_;  // empty when unbound
};

// COMMIT waits for the file's lock and its sync to disk: a coroutine's steps run off its thread.
template <>
struct is_blocking_transaction<sqlite_transaction> : std::true_type {};

// idem::sqlite_transaction_source
//
// Begins a sqlite_transaction on one connection for each call of a method annotated with
// transaction = "required" (see idem::transaction_source): give the same connection to the class,
// whose body then writes through it inside that transaction. Used by one thread at a time, as the
// connection is.
using sqlite_transaction_source = basic_transaction_source<sqlite_transaction, sqlite3*>;

}  // namespace idem
