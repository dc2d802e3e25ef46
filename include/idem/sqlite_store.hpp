// idem/sqlite_store.hpp — a store in one SQLite database file, shared by threads and processes.
//
//   idem::sqlite_store store{"/var/lib/app/idem.db"};
//   idem::engine engine{store};
//
// The file is put in WAL mode and gets one table (default `idem_records`), created on open if it
// is missing. Every process that opens the same file sees the same records. A record stores the
// scope and the SHA-256 of the key, never the raw key. Each store keeps a small pool of
// connections and runs every statement through statements prepared once per connection.
//
// Waiting: a duplicate that finds the record held waits inside try_acquire. Waiters in the same
// store are woken by a per-record condition variable the moment the holder completes or releases
// through this store (no polling); a holder in another process (or another store object on the
// same file) is noticed by a re-check whose interval doubles from `recheck_initial` up to
// `recheck_max`, and an expired lease is stolen as soon as it expires. No call ever blocks longer
// than its wait plus one bounded round trip.
//
// Transactions: idem::sqlite_transaction (<idem/sqlite_transaction.hpp>) wraps a connection the
// application opened on the same file; under join-transaction the record is completed by an
// UPDATE on that connection, inside that transaction. See docs/stores/sqlite.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <idem/store.hpp>
#include <memory>
#include <string>
#include <string_view>

namespace idem {

// How hard a commit of the store's own connections pushes data to the disk (SQLite's
// `PRAGMA synchronous` in WAL mode).
enum class sqlite_synchronous {
  // Commits survive a crash of the process; the most recent ones may be lost on power loss or an
  // operating-system crash (never corrupted).
  normal,
  // Every commit is flushed to the disk before it returns: it survives power loss too.
  full,
};

// Settings of a sqlite_store. An aggregate; sqlite_store's constructor validates it.
struct sqlite_store_options {
  // The database file; created if missing, its directory must exist. ":memory:" and empty paths
  // are refused (the pool's connections would each see a different database).
  std::filesystem::path path;
  // Table holding the records: [A-Za-z_][A-Za-z0-9_]*, at most 64 characters.
  std::string table = "idem_records";
  // Connections in the pool, opened lazily, at least 1. A connection is held for one short
  // statement sequence and never while a duplicate waits.
  std::size_t connections = 4;
  // How long complete, release and purge_expired wait for the database's write lock (held by
  // another process, or by an application transaction that has written) before they throw
  // store_unavailable_error. >= 0. extend waits at most 3/8 of its lease of it, re-trying every millisecond.
  std::chrono::milliseconds busy_timeout = std::chrono::seconds(5);
  // The least time a claim may wait for the write lock even when the caller's wait is shorter
  // (a zero wait still gets one round trip). >= 0.
  std::chrono::milliseconds min_claim_lock_wait = std::chrono::milliseconds(100);
  // First and largest interval between re-checks of a record held by another process. >= 1 ms,
  // recheck_initial <= recheck_max.
  std::chrono::milliseconds recheck_initial = std::chrono::milliseconds(1);
  std::chrono::milliseconds recheck_max = std::chrono::milliseconds(50);
  // Durability of the store's own commits. A joined completion commits with the application's
  // connection and follows that connection's setting.
  sqlite_synchronous synchronous = sqlite_synchronous::full;
  // Deleted by one purge_expired transaction at most; purge_expired loops until done, releasing
  // the write lock between batches. >= 1.
  std::size_t purge_batch = 1000;
};

// idem::sqlite_store
//
// A store in a SQLite database file. Thread-safe; several processes may open the same file.
// Clock: the system clock of the machine (milliseconds since the epoch), read inside each write
// transaction, so every process on the machine shares it. Supports transactional completion
// through idem::sqlite_transaction. Not copyable or movable.
class sqlite_store final : public store {
 public:
  // Opens (or creates) the database, switches it to WAL, creates the table and its index if they
  // are missing and prepares the statements of one connection. Throws configuration_error for
  // invalid options and store_unavailable_error, naming the path and SQLite's reason, when the
  // file cannot be opened, written, or is not a database.
  explicit sqlite_store(sqlite_store_options options);
  // The same with default options for `path`.
  explicit sqlite_store(const std::filesystem::path& path);
  ~sqlite_store() override;
  sqlite_store(const sqlite_store&) = delete;
  sqlite_store& operator=(const sqlite_store&) = delete;

  // Claim-or-replay. Reads the record without taking the write lock; only an absent record, a
  // complete one past its ttl or an expired lease is claimed, in a BEGIN IMMEDIATE transaction that
  // waits for the write lock at most max(remaining wait, min_claim_lock_wait). If the lock stays
  // busy that long, answers in_flight (retry_after 0). Throws store_unavailable_error immediately if
  // the calling thread's own sqlite_transaction on this file has written (it holds the write lock,
  // so the claim could never succeed), and for failures of SQLite; corrupt_record_error for a row
  // idem cannot read.
  acquire_result try_acquire(const context& ctx) override;

  // See idem::store. Wakes this store's waiters on the record after the commit.
  void complete(const identity& id, const lease_token& token, const payload& value,
                std::chrono::milliseconds ttl) override;
  void release(const identity& id, const lease_token& token) override;
  bool extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) override;

  // Deletes expired records in batches of purge_batch, one write transaction each.
  std::size_t purge_expired() override;

  bool supports_transactional_completion() const noexcept override { return true; }

  // Empty when `tx` is an active idem::sqlite_transaction whose connection has this store's
  // database file open for writing (the same file: by name, or by device and inode, so that a
  // symlink or another spelling of the path counts); otherwise what is wrong: another
  // transaction type, an ended transaction, another file, a read-only connection.
  std::string join_problem(const transaction& tx) const override;

  // Runs the completing UPDATE on the connection of `tx`, which must pass join_problem (else
  // configuration_error with its reason). The
  // statement waits for the write lock with that connection's own busy handler. Throws
  // lease_lost_error like complete, store_unavailable_error if SQLite fails (the message explains
  // SQLITE_BUSY_SNAPSHOT: the transaction read the file before the record was claimed). Waiters
  // of this store are woken when `tx` commits.
  void complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                               std::chrono::milliseconds ttl, transaction& tx) override;

  // When join_problem(tx) is empty, moves the lease with an UPDATE on the connection of `tx`,
  // inside it: the transaction then holds the write lock, so the lease cannot be taken over before
  // it ends (and a rollback undoes the extension). Works while `tx` already holds the write lock.
  // Otherwise the same as extend. Throws store_unavailable_error if SQLite fails.
  bool extend_in_transaction(const identity& id, const lease_token& token, std::chrono::milliseconds lease,
                             transaction& tx) override;

  std::size_t waiting() const noexcept override;

  // The same three without blocking the caller, on two threads of the store's own (its calls
  // are local and short): a duplicate's wait is a registration plus a timer, not a thread, and is
  // woken by a completion or release through this store, at the holder's lease end, or for the
  // re-check of a holder in another process. A thread's sqlite_transaction does not apply.
  // Destroying the store answers the calls still waiting store_unavailable_error.
  void async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) override;
  void async_complete(const identity& id, const lease_token& token, const payload& value,
                      std::chrono::milliseconds ttl, async_done done) override;
  void async_release(const identity& id, const lease_token& token, async_done done) override;

  std::string_view name() const noexcept override { return "sqlite_store"; }

  // Administration (<idem/store_admin.hpp>), on the store's connections; a release takes the
  // write lock like any other write.
  bool supports_administration() const noexcept override { return true; }
  std::optional<record_summary> inspect_record(const identity& id, bool with_payload) override;
  std::vector<record_summary> list_records(const record_query& query) override;
  admin_release release_record(const identity& id, bool end_live_lease) override;
  record_counts count_records() override;

  // The absolute file name SQLite opened.
  const std::string& filename() const noexcept;

 private:
  struct state;
  class acquire_attempts;
  struct async_acquire;
  std::unique_ptr<state> state_;
};

}  // namespace idem
