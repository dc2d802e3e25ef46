// idem/postgres_store.hpp — the PostgreSQL store (libpq; target idem::postgres).
//
//   idem::postgres_store store{{.conninfo = "host=db.internal dbname=orders user=app"}};
//   store.create_schema();             // once, or run runtime/postgres/schema.sql yourself
//   idem::engine engine{store};
//
// Records live in the table idem_records (scope, SHA-256 of the key — never the raw key —, state,
// lease, payload). Every operation is one statement on one of the store's pooled connections:
// try_acquire calls the server-side function idem_claim, which inserts the record, takes over one
// whose lease or replay window has passed, or answers with the complete record, in one round
// trip. complete, release, extend and purge are single statements fenced by the lease token. All
// timestamps come from the database clock.
//
// A duplicate waits without polling: one LISTEN connection per store receives a NOTIFY when a
// record completes or is released and wakes exactly the waiters of that record. If that
// connection drops, waiters re-check every `fallback_recheck` until it is back.
//
// Transactions: completion_mode::join_transaction writes the record inside an
// idem::postgres_transaction (see <idem/postgres_transaction.hpp>) on the caller's connection, so
// the business rows and the record commit or roll back together.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <idem/event_loop.hpp>
#include <idem/log.hpp>
#include <idem/store.hpp>
#include <memory>
#include <string>
#include <string_view>

namespace idem {

// Settings of a postgres_store. An aggregate; the constructor validates it.
struct postgres_store_options {
  // libpq connection string ("host=... dbname=...") or URI ("postgresql://..."). The store's
  // objects are looked up through the connection's search_path.
  std::string conninfo;
  // Connections for store operations, 1..1000; one more is opened for LISTEN. A thread waiting
  // for a duplicate holds no connection while it waits.
  std::size_t pool_size = 8;
  // Bound on opening a connection and on every statement not bounded by a caller's wait
  // (complete, release, extend, purge, create_schema, complete_in_transaction), and the grace a
  // claim gets beyond the caller's wait. >= 1 ms. Also set as the sessions' statement_timeout.
  std::chrono::milliseconds operation_timeout = std::chrono::seconds(5);
  // While the LISTEN connection is down, a waiting duplicate re-checks its record this often.
  // >= 1 ms.
  std::chrono::milliseconds fallback_recheck = std::chrono::milliseconds(100);
  // Rows deleted per statement by purge_expired(), >= 1.
  std::size_t purge_batch = 10000;
  // fallback_application_name of the store's connections; the LISTEN connection gets
  // "<application_name>-listener". A conninfo that sets application_name wins.
  std::string application_name = "idem";
  // Where the store reports what it cannot throw (its LISTEN connection dropping). Empty = silent.
  log_sink log = stderr_log_sink;
  // What asynchronous calls wait on. Empty: a thread of the store's own, started on first use.
  // Give idem::asio::event_loop (<idem/asio_event_loop.hpp>) to drive the statements on your
  // io_context: libpq's sockets are watched by Asio and calls complete there, with no thread in
  // between. Must outlive the store.
  std::shared_ptr<idem::event_loop> event_loop = nullptr;
};

// What postgres_store::statistics() counts since the store was constructed.
struct postgres_store_statistics {
  std::uint64_t round_trips = 0;         // statements sent to the server (prepares included)
  std::uint64_t connections_opened = 0;  // pool connections opened (replacements included)
  std::uint64_t listener_connects = 0;   // successful LISTEN connections
  // Statements the store stopped waiting for (a timeout) and asked the server to cancel (PQcancel,
  // sent from a thread of the store), and how many of those requests the postmaster took. Taken
  // means the backend was signalled, not that the statement was still running.
  std::uint64_t cancels_requested = 0;
  std::uint64_t cancels_delivered = 0;
  // Claims and releases that were sent and not answered (outcome_unknown_error), which the store
  // settles in the background once the server answers again and the server process they were sent
  // to has ended: `unanswered_released` had taken effect after all, and the store deleted the
  // record they left in progress under their token (fenced: never another holder's record);
  // `unanswered_void` had not (cancelled, never run) or left nothing to undo; `unanswered_dropped`
  // were given up (more than 1024 at once, or their server process outlived 10 minutes of answers)
  // and are left to their lease. `unanswered_backend_alive` counts the checks that found such a
  // server process still running, so the store waited. Pending: unanswered - released - void -
  // dropped.
  std::uint64_t unanswered = 0;
  std::uint64_t unanswered_released = 0;
  std::uint64_t unanswered_void = 0;
  std::uint64_t unanswered_dropped = 0;
  std::uint64_t unanswered_backend_alive = 0;
};

// idem::postgres_store
//
// Thread-safe. Not copyable or movable. The database may be down when the store is built: every
// operation then fails with store_unavailable_error naming the operation and the masked record,
// within its bound, and the store recovers by itself when the database is back.
//
// A statement that times out is cancelled on the server (PQcancel from a thread of the store; the
// sessions' statement_timeout is operation_timeout). A claim or release that fails with
// outcome_unknown_error is remembered (scope, key digest, token) and released in the background,
// fenced by its token, once the server answers again and the server process that received it has
// ended: a claim the server ran after the client gave up does not hold the key for a whole lease.
class postgres_store final : public store {
 public:
  // Throws configuration_error for an empty or unparsable conninfo, a pool size outside 1..1000,
  // a timeout or interval below 1 ms, or a purge batch of 0. Opens no connection to the pool
  // (they open on first use) and starts the LISTEN thread.
  explicit postgres_store(postgres_store_options options);
  // Stops the LISTEN thread and the background threads and closes every connection. No call may
  // be running. Waits at most operation_timeout for a background statement in progress, and at
  // most operation_timeout for a cancel request in progress (then leaves that thread to end when
  // the postmaster answers). Unanswered claims not yet settled are left to their lease.
  ~postgres_store() override;
  postgres_store(const postgres_store&) = delete;
  postgres_store& operator=(const postgres_store&) = delete;

  acquire_result try_acquire(const context& ctx) override;
  void complete(const identity& id, const lease_token& token, const payload& value,
                std::chrono::milliseconds ttl) override;
  void release(const identity& id, const lease_token& token) override;
  bool extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) override;
  std::size_t purge_expired() override;

  // The same three without a thread parked per call: each statement is sent on a pooled
  // connection in libpq's non-blocking mode and its socket watched by the event loop
  // (options.event_loop, else the store's own thread), and a duplicate's wait is a registration
  // on the LISTEN connection's notifications plus a timer. Calls beyond pool_size at once queue
  // for a connection; opening one takes a thread of the shared blocking pool for that step.
  // Handlers run on the event loop's or the listener's thread and must not block. Destroying the
  // store answers the calls still waiting store_unavailable_error.
  void async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) override;
  void async_complete(const identity& id, const lease_token& token, const payload& value,
                      std::chrono::milliseconds ttl, async_done done) override;
  void async_release(const identity& id, const lease_token& token, async_done done) override;

  bool supports_transactional_completion() const noexcept override { return true; }

  // Empty when `tx` is an active, unfailed idem::postgres_transaction whose connection reaches the
  // very idem_records table the store writes: asked of the server on that connection, inside `tx`
  // (one round trip), and compared with the store's own answer (read once): the same cluster (its
  // system identifier; the postmaster's start time where pg_control_system() is not granted), the
  // same database (oid) and the same table (the oid its search_path resolves), not a standby.
  // Otherwise what is wrong, naming the databases. Throws store_unavailable_error if either
  // question fails (the caller's transaction then cannot commit).
  std::string join_problem(const transaction& tx) const override;

  // Runs the completing UPDATE on the connection of `tx`, which must pass join_problem (else
  // configuration_error with its reason), inside that
  // transaction: the record commits or rolls back with it, and waiters are notified at commit.
  // Throws lease_lost_error like complete(), store_unavailable_error if the statement fails (the
  // caller's transaction is then aborted), bounded by operation_timeout (the statement is
  // cancelled, the connection kept).
  void complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                               std::chrono::milliseconds ttl, transaction& tx) override;

  // When join_problem(tx) is empty, moves the lease with an UPDATE on the connection of `tx`,
  // inside it (without SKIP LOCKED: `tx` may hold the row's lock itself), so the row stays locked
  // against a take-over until `tx` ends; otherwise the same as extend. Bounded by
  // operation_timeout; throws store_unavailable_error if the statement fails.
  bool extend_in_transaction(const identity& id, const lease_token& token, std::chrono::milliseconds lease,
                             transaction& tx) override;

  std::size_t waiting() const noexcept override;

  std::string_view name() const noexcept override { return "postgres_store"; }

  // Administration (<idem/store_admin.hpp>): one statement each on a pooled connection, bounded
  // by operation_timeout. A release notifies the record's waiters like any release.
  bool supports_administration() const noexcept override { return true; }
  std::optional<record_summary> inspect_record(const identity& id, bool with_payload) override;
  std::vector<record_summary> list_records(const record_query& query) override;
  admin_release release_record(const identity& id, bool end_live_lease) override;
  record_counts count_records() override;

  // Creates the table idem_records, its index and the function idem_claim if they do not exist
  // (the text of schema_sql()), in one transaction under an advisory lock: safe to call
  // repeatedly and from several processes at once. Throws store_unavailable_error.
  void create_schema();

  // The schema script shipped as runtime/postgres/schema.sql.
  static std::string_view schema_sql() noexcept;

  // Counters since construction, for tests, metrics and benchmarks.
  postgres_store_statistics statistics() const noexcept;

  // The server process id of the LISTEN connection, or 0 while it is down. For tests.
  int listener_backend_pid() const noexcept;

  // The store's state, opaque: declared here so that the store's own files can name it.
  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace idem
