// runtime/sqlite/store_parts.hpp — what sqlite_store's files share: reading and judging a record,
// the store's write transactions, its state, and the looks-and-claims machine (acquire_attempts)
// that the blocking try_acquire (claims.cpp) and the asynchronous one (async_calls.cpp) drive.
#pragma once

#include <sqlite3.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <idem/deadline.hpp>
#include <idem/detail/waiter_count.hpp>
#include <idem/errors.hpp>
#include <idem/sqlite_store.hpp>
#include <idem/sqlite_transaction.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "../core/blocking_pool.hpp"
#include "../core/pending_calls.hpp"
#include "../core/timer_queue.hpp"
#include "record_waiters.hpp"
#include "sqlite_connection.hpp"

namespace idem::detail::sq {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;
using detail::bound_statement;
using detail::sqlite_connection;
using detail::sqlite_failure;
using detail::statement;

inline constexpr std::int64_t state_in_progress = 1;
inline constexpr std::int64_t state_complete = 2;
inline constexpr std::int64_t max_time_point_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::duration::max()).count();

// The store's clock: milliseconds since the epoch on the system clock, shared by every process.
std::int64_t clock_ms();

milliseconds left_until(steady::time_point deadline) noexcept;

bool is_busy(int code) noexcept;

// The primary key of a record and the name its waiters share.
struct record_key {
  explicit record_key(const identity& id) : scope(id.scope()), digest(id.key_digest()) {}

  std::string waiter_name() const {
    std::string name = scope;
    name.push_back('\0');
    name.append(reinterpret_cast<const char*>(digest.data()), digest.size());
    return name;
  }
  void bind(bound_statement& s) const {
    s.text(1, scope);
    s.blob(2, digest.data(), digest.size());
  }

  std::string scope;
  std::array<unsigned char, 32> digest;
};

// One row as read back.
struct stored_record {
  std::int64_t state = 0;
  lease_token token;  // in progress only
  std::int64_t lease_expires_at = 0;
  std::int64_t expires_at = 0;
  std::optional<std::string> fingerprint;
  payload value;
  std::int64_t completed_at = 0;
};

std::string describe(std::string_view operation, const identity& id);

// Reads the record of `key` with `s` (select_record), or nullopt if there is none.
std::optional<stored_record> read_record(bound_statement& s, const record_key& key, const identity& id);

std::optional<stored_record> read_record(const sqlite_connection& c, const record_key& key, const identity& id);

// What a read of the record means for a caller.
struct held {
  milliseconds remaining;  // of the holder's lease
  lease_token token;       // the holder's
};

// Absent, complete past its ttl, or in progress under a lapsed lease (`lapsed_lease`: a claim
// would take it over from its holder).
struct claimable {
  bool lapsed_lease = false;
};

using verdict = std::variant<duplicate, fingerprint_mismatch, held, claimable>;

verdict judge(std::optional<stored_record> row, const context& ctx, std::int64_t now);

// The reason a fenced mutation matched no row, for lease_lost_error.
std::string lost_reason(const sqlite_connection* c, sqlite3* db, std::string_view table, const record_key& key,
                        const lease_token& token);

// Binds and runs the completing UPDATE; returns the number of rows changed.
int run_complete(bound_statement& s, const record_key& key, const lease_token& token, const payload& value,
                 milliseconds ttl, std::int64_t now);

// Binds and runs the claiming upsert; returns the number of rows changed (1 = claimed).
int run_claim(bound_statement& s, const record_key& key, const context& ctx, const lease_token& token,
              std::int64_t now);

// The file name of `db`'s main database, or "" for a temporary or in-memory one.
std::string_view main_file(sqlite3* db);

// Whether `db`'s main database is the file `filename`: by name, or else by what the file system
// says (the same device and inode), so that a symlink, a hard link or another spelling of the
// path counts as the same file and a file replaced since never does.
bool same_file(sqlite3* db, const std::string& filename);

// The calling thread's own active sqlite_transaction on `filename`, or nullptr.
sqlite_transaction* own_transaction(const std::string& filename);

// A BEGIN IMMEDIATE transaction on a pooled connection, behind the store's writer mutex.
// locked() is false if the mutex or SQLite's write lock stayed busy until the deadline.
class write_transaction {
 public:
  // `eager`: wait for SQLite's write lock by re-trying every millisecond (see
  // sqlite_connection::eager_busy_wait), for lease extensions.
  write_transaction(std::timed_mutex& writer, detail::connection_pool& pool, milliseconds busy_timeout,
                    steady::time_point lock_deadline, std::string_view doing, bool eager = false)
      : lock_(writer, std::defer_lock) {
    if (!lock_.try_lock_until(lock_deadline)) return;
    loan_.emplace(pool.borrow(std::max(lock_deadline, deadline_after(busy_timeout))));
    if (eager) {
      (*loan_)->eager_busy_wait(lock_deadline);
    } else {
      (*loan_)->busy_timeout(left_until(lock_deadline));
    }
    const int rc = (*loan_)->try_run(statement::begin_immediate);
    if (is_busy(rc)) return;
    if (rc != SQLITE_OK) throw detail::failure_of((*loan_)->handle(), rc, doing);
    locked_ = true;
  }

  bool locked() const noexcept { return locked_; }
  sqlite_connection& connection() const noexcept { return **loan_; }
  void commit(std::string_view doing) { (*loan_)->run(statement::commit, doing); }

 private:
  std::unique_lock<std::timed_mutex> lock_;
  std::optional<detail::connection_pool::loan> loan_;  // destroyed first: rolls back, goes back
  bool locked_ = false;
};

struct lock_busy {};
using claim_result = std::variant<acquired, verdict, lock_busy>;

}  // namespace idem::detail::sq

namespace idem {

using namespace detail::sq;

struct sqlite_store::state {
  state(sqlite_store_options o, std::string file, detail::connection_settings settings,
        std::unique_ptr<sqlite_connection> first)
      : options(std::move(o)),
        filename(std::move(file)),
        pool(std::move(settings), options.connections, std::move(first)) {}

  sqlite_store_options options;
  std::string filename;
  detail::connection_pool pool;
  // Serializes this store's write transactions in the process.
  std::timed_mutex writer;
  // Callers blocked in try_acquire: waiting().
  detail::waiter_count waiting;
  // Shared with after_commit callbacks, which may run after the store is gone.
  std::shared_ptr<detail::record_waiters> waiters = std::make_shared<detail::record_waiters>();

  // Asynchronous try_acquire calls that have not answered, for the destructor to answer.
  detail::pending_calls<async_acquire> pending;
  // Last, so that they go first: what their tasks use is still there.
  detail::timer_queue timers;        // an asynchronous wait's time
  detail::blocking_pool workers{2};  // asynchronous calls' looks, claims, completions, releases

  ~state();

  [[noreturn]] void unavailable(std::string_view operation, const identity* id, std::string_view why) const {
    std::string text = id != nullptr ? describe(operation, *id) : "sqlite_store: cannot " + std::string(operation);
    text += ": ";
    text += why;
    text += " [";
    text += filename;
    text += ']';
    throw store_unavailable_error(text, std::string(operation), id != nullptr ? id->to_string() : std::string());
  }

  // Throws store_unavailable_error for `operation` on `id` when `tx` did not get the write lock:
  // another writer kept it for busy_timeout.
  void require_locked(const write_transaction& tx, std::string_view operation, const identity& id) const {
    if (!tx.locked()) unavailable(operation, &id, "the database stayed locked by another writer for busy_timeout");
  }

  // Throws if the calling thread's own transaction on this file holds the write lock: no other
  // connection can write before it ends, and it cannot end while this thread waits.
  void refuse_self_lock(std::string_view operation, const identity& id) const {
    sqlite_transaction* tx = own_transaction(filename);
    if (tx != nullptr && sqlite3_txn_state(tx->connection(), "main") == SQLITE_TXN_WRITE)
      unavailable(operation, &id,
                  "the calling thread's sqlite_transaction has written to the database and holds its write lock "
                  "until it ends, so the store's connection cannot write now; do this outside the transaction");
  }
};

// One try_acquire's looks and claims: next() looks (and claims a claimable record) and answers, or
// says until when to wait for the record to change; the blocking and the asynchronous entry
// points wait their own way and call next() again. Wakes on a completion or release through this
// store, at the lease's expiry (to steal it), or, when the holder is not this store's, to
// re-check for a holder elsewhere (growing back-off). Throws sqlite_failure.
class sqlite_store::acquire_attempts {
 public:
  struct wait_for {
    std::uint64_t seen;  // the generation the wait must see move
    steady::time_point until;
  };
  using step = std::variant<acquire_result, wait_for>;

  acquire_attempts(state& s, const context& ctx, steady::time_point deadline)
      : s_(s), ctx_(ctx), deadline_(deadline), key_(ctx.id), enrolled_(s.waiters->enroll(key_.waiter_name())),
        counted_(s.waiting), backoff_(s.options.recheck_initial) {}

  // Blocking, and short: one read, and a write transaction for a claimable record.
  step next() {
    const std::uint64_t seen = enrolled_.generation();
    verdict v = look();
    if (const auto* looked = std::get_if<claimable>(&v)) {
      claim_result c = claim(*looked);
      if (auto* a = std::get_if<acquired>(&c)) return acquire_result{*a};
      if (std::holds_alternative<lock_busy>(c)) return acquire_result{in_flight{milliseconds(0)}};
      v = std::move(std::get<verdict>(c));
    }
    if (auto* d = std::get_if<duplicate>(&v)) return acquire_result{std::move(*d)};
    if (auto* m = std::get_if<fingerprint_mismatch>(&v)) return acquire_result{std::move(*m)};
    const held* h = std::get_if<held>(&v);
    const milliseconds remaining = h != nullptr ? h->remaining : milliseconds(0);
    const steady::time_point now = steady::now();
    if (now >= deadline_) return acquire_result{in_flight{remaining}};
    const bool local_holder = h != nullptr && s_.waiters->holds(h->token);
    const steady::time_point wake = std::min({deadline_, saturating_add(now, remaining + milliseconds(1)),
                                              local_holder ? steady::time_point::max() : saturating_add(now, backoff_)});
    // Enrolled before the look: a completion through this store from the look on moves the
    // generation, so the wait returns at once for it.
    counted_.begin();
    return wait_for{seen, wake};
  }

  // The wait ended: `notified` when the generation moved, false when its time came.
  void woken(bool notified) {
    if (!notified) backoff_ = std::min(backoff_ * 2, s_.options.recheck_max);
  }

  detail::record_waiters::enrollment& enrollment() noexcept { return enrolled_; }

 private:
  // Looks at the record without the write lock.
  verdict look() {
    detail::connection_pool::loan c = s_.pool.borrow(deadline_after(s_.options.busy_timeout));
    std::optional<stored_record> row = read_record(*c, key_, ctx_.id);
    return judge(std::move(row), ctx_, clock_ms());
  }

  // Claims a record that looked claimable (`seen`), or reports what holds it now.
  claim_result claim(const claimable& seen) {
    const lease_token token = lease_token::generate();
    if (sqlite_transaction* tx = own_transaction(s_.filename);
        tx != nullptr && sqlite3_txn_state(tx->connection(), "main") != SQLITE_TXN_NONE) {
      // The caller's transaction on this file has begun reading or writing: a claim committed
      // elsewhere now would make its writes fail (stale snapshot) or wait for its own lock, so
      // the claim is written inside it and becomes visible with its commit.
      sqlite3* db = tx->connection();
      const std::int64_t now = clock_ms();
      bound_statement up(db, statement::claim, s_.options.table, "claim the record in the caller's transaction");
      int changed = 0;
      try {
        changed = run_claim(up, key_, ctx_, token, now);
      } catch (const sqlite_failure& f) {
        if (f.code() == SQLITE_BUSY_SNAPSHOT)
          throw sqlite_failure(f.code(),
                               std::string(f.what()) +
                                   "; the caller's sqlite_transaction read the database before another "
                                   "connection committed, so SQLite cannot let it write: retry the transaction");
        if (is_busy(f.code())) return lock_busy{};
        throw;
      }
      if (changed == 1) {
        s_.waiters->hold(token, ctx_.lease);
        return acquired{token, seen.lapsed_lease};
      }
      bound_statement again(db, statement::select_record, s_.options.table, "read the record");
      return judge(read_record(again, key_, ctx_.id), ctx_, now);
    }
    write_transaction tx(s_.writer, s_.pool, s_.options.busy_timeout,
                         std::max(deadline_, deadline_after(s_.options.min_claim_lock_wait)), "begin the claim");
    if (!tx.locked()) return lock_busy{};
    const std::int64_t now = clock_ms();
    int changed = 0;
    {
      bound_statement up(tx.connection(), statement::claim);
      changed = run_claim(up, key_, ctx_, token, now);
    }
    if (changed == 1) {
      tx.commit("commit the claim");
      s_.waiters->hold(token, ctx_.lease);
      return acquired{token, seen.lapsed_lease};
    }
    return judge(read_record(tx.connection(), key_, ctx_.id), ctx_, now);
  }

  state& s_;
  const context& ctx_;
  const steady::time_point deadline_;
  const record_key key_;
  detail::record_waiters::enrollment enrolled_;
  detail::waiter_count::scope counted_;
  milliseconds backoff_;
};

}  // namespace idem
