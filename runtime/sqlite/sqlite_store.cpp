// runtime/sqlite/sqlite_store.cpp — idem::sqlite_store.
//
// Claim-or-replay reads the record first, on any pooled connection and without the write lock
// (WAL readers never wait for writers): a live complete record is a duplicate, a live lease is
// waited for. Only a claimable record (absent, complete past its ttl, lease expired) takes the
// write lock, in BEGIN IMMEDIATE, where one upsert claims it atomically or leaves a live record
// alone. The store's writers queue on one in-process mutex before they ask SQLite for the lock,
// so SQLite's sleeping busy handler only ever arbitrates between processes and application
// transactions.
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <array>
#include <cctype>
#include <climits>
#include <cstdint>
#include <idem/deadline.hpp>
#include <idem/detail/waiter_count.hpp>
#include <idem/errors.hpp>
#include <idem/sqlite_store.hpp>
#include <idem/sqlite_transaction.hpp>
#include <idem/transaction.hpp>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <unordered_set>
#include <variant>

#include <idem/detail/attributes_codec.hpp>
#include "../core/blocking_pool.hpp"
#include "../core/pending_calls.hpp"
#include "../core/timer_queue.hpp"
#include "record_waiters.hpp"
#include "sqlite_connection.hpp"

namespace idem {

namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;
using detail::bound_statement;
using detail::sqlite_connection;
using detail::sqlite_failure;
using detail::statement;

constexpr std::int64_t state_in_progress = 1;
constexpr std::int64_t state_complete = 2;
constexpr std::int64_t max_time_point_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::duration::max()).count();

// The store's clock: milliseconds since the epoch on the system clock, shared by every process.
std::int64_t clock_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

milliseconds left_until(steady::time_point deadline) noexcept {
  const auto now = steady::now();
  if (deadline <= now) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(deadline - now);
}

bool is_busy(int code) noexcept {
  return (code & 0xff) == SQLITE_BUSY;
}

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

std::string describe(std::string_view operation, const identity& id) {
  std::string text = "sqlite_store: cannot ";
  text += operation;
  text += ' ';
  text += id.to_string();
  return text;
}

// Reads the record of `key` with `s` (select_record), or nullopt if there is none.
std::optional<stored_record> read_record(bound_statement& s, const record_key& key, const identity& id) {
  key.bind(s);
  if (!s.step("read the record")) return std::nullopt;
  stored_record r;
  r.state = s.integer(0);
  r.lease_expires_at = s.is_null(2) ? 0 : s.integer(2);
  r.expires_at = s.integer(3);
  if (!s.is_null(4)) r.fingerprint = s.bytes(4);
  if (r.state == state_complete) {
    if (s.is_null(5)) throw corrupt_record_error(describe("read", id) + ": a complete record has no payload type", "read", id.to_string());
    r.value.type = s.bytes(5);
    r.value.body = s.bytes(6);
    std::optional<detail::attribute_map> attributes = detail::decode_attributes(s.bytes(7));
    if (!attributes) throw corrupt_record_error(describe("read", id) + ": its payload attributes are malformed", "read", id.to_string());
    r.value.attributes = std::move(*attributes);
    r.completed_at = s.is_null(8) ? 0 : s.integer(8);
    // A time the replay's system_clock::time_point cannot hold (negative, or past the year 2262)
    // would overflow converting it.
    if (r.completed_at < 0 || r.completed_at > max_time_point_ms)
      throw corrupt_record_error(describe("read", id) + ": its completion time is out of range", "read", id.to_string());
  } else if (r.state == state_in_progress) {
    std::optional<lease_token> token = lease_token::from_bytes(s.bytes(1));
    if (!token || s.is_null(2))
      throw corrupt_record_error(describe("read", id) + ": a record in progress has no valid lease", "read", id.to_string());
    r.token = *token;
  } else {
    throw corrupt_record_error(describe("read", id) + ": unknown state " + std::to_string(r.state), "read",
                               id.to_string());
  }
  return r;
}

std::optional<stored_record> read_record(const sqlite_connection& c, const record_key& key, const identity& id) {
  bound_statement s(c, statement::select_record);
  return read_record(s, key, id);
}

// What a read of the record means for a caller.
struct held {
  milliseconds remaining;  // of the holder's lease
  lease_token token;       // the holder's
};
struct claimable {};
using verdict = std::variant<duplicate, fingerprint_mismatch, held, claimable>;

verdict judge(std::optional<stored_record> row, const context& ctx, std::int64_t now) {
  if (!row) return claimable{};
  if (row->state == state_complete) {
    if (row->expires_at <= now) return claimable{};
    if (ctx.fingerprint && row->fingerprint && *ctx.fingerprint != *row->fingerprint)
      return fingerprint_mismatch{std::move(*row->fingerprint), *ctx.fingerprint};
    return duplicate{std::move(row->value), std::chrono::system_clock::time_point(milliseconds(row->completed_at))};
  }
  if (row->lease_expires_at <= now) return claimable{};
  return held{milliseconds(row->lease_expires_at - now), row->token};
}

// The reason a fenced mutation matched no row, for lease_lost_error.
std::string lost_reason(const sqlite_connection* c, sqlite3* db, std::string_view table, const record_key& key,
                        const lease_token& token) {
  std::optional<bound_statement> owned;
  std::optional<bound_statement> cached;
  bound_statement& s = c != nullptr ? cached.emplace(*c, statement::inspect)
                                    : owned.emplace(db, statement::inspect, table, "inspect the record");
  key.bind(s);
  if (!s.step("inspect the record"))
    return "no record exists (it was released, purged or never acquired), so the lease is lost";
  if (s.integer(0) == state_complete) return "the record is already complete; its lease has ended";
  std::optional<lease_token> holder = lease_token::from_bytes(s.bytes(1));
  if (holder && *holder == token) return "the record is not in progress under this lease";
  return "the lease no longer owns the record: it expired and another caller took the record over";
}

// Binds and runs the completing UPDATE; returns the number of rows changed.
int run_complete(bound_statement& s, const record_key& key, const lease_token& token, const payload& value,
                 milliseconds ttl, std::int64_t now) {
  const auto token_blob = token.to_bytes();
  const std::string attributes = detail::encode_attributes(value.attributes);
  key.bind(s);
  s.blob(3, token_blob.data(), token_blob.size());
  s.text(4, value.type);
  s.blob(5, value.body.data(), value.body.size());
  s.blob(6, attributes.data(), attributes.size());
  s.integer(7, now);
  s.integer(8, saturating_add(now, ttl));
  s.step("write the completion");
  return s.changes();
}

// Binds and runs the claiming upsert; returns the number of rows changed (1 = claimed).
int run_claim(bound_statement& s, const record_key& key, const context& ctx, const lease_token& token,
              std::int64_t now) {
  const auto token_blob = token.to_bytes();
  key.bind(s);
  s.blob(3, token_blob.data(), token_blob.size());
  s.integer(4, saturating_add(now, ctx.lease));
  s.integer(5, saturating_add(now, ctx.ttl));
  if (ctx.fingerprint) {
    s.text(6, *ctx.fingerprint);
  } else {
    s.null(6);
  }
  s.integer(7, now);
  s.step("claim the record");
  return s.changes();
}

// The file name of `db`'s main database, or "" for a temporary or in-memory one.
std::string_view main_file(sqlite3* db) {
  const char* name = sqlite3_db_filename(db, "main");
  return name != nullptr ? std::string_view(name) : std::string_view();
}

// Whether `db`'s main database is the file `filename`: by name, or else by what the file system
// says (the same device and inode), so that a symlink, a hard link or another spelling of the
// path counts as the same file and a file replaced since never does.
bool same_file(sqlite3* db, const std::string& filename) {
  const std::string_view name = main_file(db);
  if (name.empty()) return false;
  if (name == filename) return true;
  std::error_code ec;
  return std::filesystem::equivalent(std::filesystem::path(name), std::filesystem::path(filename), ec);
}

// The calling thread's own active sqlite_transaction on `filename`, or nullptr.
sqlite_transaction* own_transaction(const std::string& filename) {
  auto* tx = dynamic_cast<sqlite_transaction*>(current_transaction());
  if (tx == nullptr || !tx->active() || !same_file(tx->connection(), filename)) return nullptr;
  return tx;
}

}  // namespace

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

namespace {

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

}  // namespace

sqlite_store::sqlite_store(const std::filesystem::path& path) : sqlite_store(sqlite_store_options{.path = path}) {}

sqlite_store::sqlite_store(sqlite_store_options options) {
  const std::string path = options.path.string();
  if (path.empty()) throw configuration_error("sqlite_store: the database path is empty; name a file");
  if (path == ":memory:" || path.rfind("file:", 0) == 0)
    throw configuration_error("sqlite_store: '" + path +
                              "' is not a file path; the store's connections must share one database file");
  const std::string& t = options.table;
  const bool table_ok =
      !t.empty() && t.size() <= 64 && (std::isalpha(static_cast<unsigned char>(t[0])) || t[0] == '_') &&
      std::all_of(t.begin(), t.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (!table_ok)
    throw configuration_error("sqlite_store: table name '" + t +
                              "' is invalid; use 1 to 64 letters, digits or '_', not starting with a digit");
  if (options.connections < 1) throw configuration_error("sqlite_store: connections must be at least 1, got: 0");
  if (options.busy_timeout < milliseconds(0) || options.min_claim_lock_wait < milliseconds(0))
    throw configuration_error("sqlite_store: busy_timeout and min_claim_lock_wait must not be negative");
  if (options.recheck_initial < milliseconds(1) || options.recheck_max < options.recheck_initial)
    throw configuration_error("sqlite_store: recheck_initial must be at least 1 ms and at most recheck_max, got: " +
                              std::to_string(options.recheck_initial.count()) + " ms and " +
                              std::to_string(options.recheck_max.count()) + " ms");
  if (options.purge_batch < 1) throw configuration_error("sqlite_store: purge_batch must be at least 1, got: 0");

  detail::connection_settings settings{path, options.table, options.synchronous, options.busy_timeout};
  std::unique_ptr<sqlite_connection> first;
  try {
    first = std::make_unique<sqlite_connection>(settings, true);
  } catch (const sqlite_failure& f) {
    throw store_unavailable_error("sqlite_store: cannot open the database '" + path + "': " + f.what());
  }
  const char* name = sqlite3_db_filename(first->handle(), "main");
  std::string filename = name != nullptr && *name != '\0' ? name : path;
  state_ = std::make_unique<state>(std::move(options), std::move(filename), std::move(settings), std::move(first));
}

sqlite_store::~sqlite_store() = default;

const std::string& sqlite_store::filename() const noexcept {
  return state_->filename;
}

std::size_t sqlite_store::waiting() const noexcept {
  return state_->waiting.get();
}

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
    if (std::holds_alternative<claimable>(v)) {
      claim_result c = claim();
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

  // Claims a record that looked claimable, or reports what holds it now.
  claim_result claim() {
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
        return acquired{token};
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
      return acquired{token};
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

acquire_result sqlite_store::try_acquire(const context& ctx) {
  state& s = *state_;
  try {
    acquire_attempts attempts(s, ctx, deadline_after(ctx.wait));
    for (;;) {
      acquire_attempts::step next = attempts.next();
      if (auto* answer = std::get_if<acquire_result>(&next)) return std::move(*answer);
      const auto& wait = std::get<acquire_attempts::wait_for>(next);
      attempts.woken(attempts.enrollment().wait_until(wait.seen, wait.until));
    }
  } catch (const sqlite_failure& f) {
    s.unavailable("try_acquire", &ctx.id, f.what());
  }
}

void sqlite_store::complete(const identity& id, const lease_token& token, const payload& value, milliseconds ttl) {
  state& s = *state_;
  const record_key key(id);
  try {
    s.refuse_self_lock("complete", id);
    write_transaction tx(s.writer, s.pool, s.options.busy_timeout, deadline_after(s.options.busy_timeout),
                         "begin the completion");
    if (!tx.locked()) s.unavailable("complete", &id, "the database stayed locked by another writer for busy_timeout");
    int changed = 0;
    {
      bound_statement up(tx.connection(), statement::complete);
      changed = run_complete(up, key, token, value, ttl, clock_ms());
    }
    if (changed == 0)
      throw lease_lost_error(describe("complete", id) + ": " + lost_reason(&tx.connection(), nullptr, {}, key, token),
                             "complete", id.to_string());
    tx.commit("commit the completion");
  } catch (const sqlite_failure& f) {
    s.unavailable("complete", &id, f.what());
  } catch (const lease_lost_error&) {
    s.waiters->drop(token);
    throw;
  }
  s.waiters->drop(token);
  s.waiters->notify(key.waiter_name());
}

void sqlite_store::release(const identity& id, const lease_token& token) {
  state& s = *state_;
  const record_key key(id);
  try {
    s.refuse_self_lock("release", id);
    write_transaction tx(s.writer, s.pool, s.options.busy_timeout, deadline_after(s.options.busy_timeout),
                         "begin the release");
    if (!tx.locked()) s.unavailable("release", &id, "the database stayed locked by another writer for busy_timeout");
    const auto token_blob = token.to_bytes();
    int changed = 0;
    {
      bound_statement del(tx.connection(), statement::release);
      key.bind(del);
      del.blob(3, token_blob.data(), token_blob.size());
      del.step("delete the record");
      changed = del.changes();
    }
    if (changed == 0)
      throw lease_lost_error(describe("release", id) + ": " + lost_reason(&tx.connection(), nullptr, {}, key, token),
                             "release", id.to_string());
    tx.commit("commit the release");
  } catch (const sqlite_failure& f) {
    s.unavailable("release", &id, f.what());
  } catch (const lease_lost_error&) {
    s.waiters->drop(token);
    throw;
  }
  s.waiters->drop(token);
  s.waiters->notify(key.waiter_name());
}

bool sqlite_store::extend(const identity& id, const lease_token& token, milliseconds lease) {
  state& s = *state_;
  const record_key key(id);
  try {
    s.refuse_self_lock("extend", id);
    // The heartbeat extends at lease/2, so the lease still runs for half of it: wait for the write
    // lock for up to 3/8 of the lease (extends run in parallel, a slow one holds up no other), and
    // re-try every millisecond rather than sleep through other writers' gaps (issue 13: with
    // SQLite's backing-off busy handler another process took the lock ~30 times in a row). Divided
    // first: lease * 3 overflows for the longest leases.
    const milliseconds budget = std::min(s.options.busy_timeout, std::max(lease / 8 * 3, milliseconds(1)));
    write_transaction tx(s.writer, s.pool, s.options.busy_timeout, deadline_after(budget), "begin the extension",
                         /*eager=*/true);
    if (!tx.locked())
      s.unavailable("extend", &id, "the database stayed locked by another writer for 3/8 of the lease");
    const auto token_blob = token.to_bytes();
    bool extended = false;
    {
      bound_statement up(tx.connection(), statement::extend);
      key.bind(up);
      up.blob(3, token_blob.data(), token_blob.size());
      up.integer(4, saturating_add(clock_ms(), lease));
      up.step("extend the lease");
      extended = up.changes() == 1;
    }
    tx.commit("commit the extension");
    if (extended && s.waiters->holds(token)) s.waiters->hold(token, lease);
    return extended;
  } catch (const sqlite_failure& f) {
    s.unavailable("extend", &id, f.what());
  }
}

std::size_t sqlite_store::purge_expired() {
  state& s = *state_;
  std::size_t total = 0;
  try {
    for (;;) {
      write_transaction tx(s.writer, s.pool, s.options.busy_timeout, deadline_after(s.options.busy_timeout),
                           "begin the purge");
      if (!tx.locked())
        s.unavailable("purge expired records", nullptr,
                      "the database stayed locked by another writer for busy_timeout");
      int deleted = 0;
      {
        bound_statement del(tx.connection(), statement::purge_batch);
        del.integer(1, clock_ms());
        del.integer(2, static_cast<std::int64_t>(std::min<std::size_t>(s.options.purge_batch, INT_MAX)));
        del.step("delete expired records");
        deleted = del.changes();
      }
      tx.commit("commit the purge");
      total += static_cast<std::size_t>(deleted);
      if (static_cast<std::size_t>(deleted) < s.options.purge_batch) return total;
    }
  } catch (const sqlite_failure& f) {
    s.unavailable("purge expired records", nullptr, f.what());
  }
}

void sqlite_store::complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                                           milliseconds ttl, transaction& tx) {
  state& s = *state_;
  if (std::string problem = join_problem(tx); !problem.empty())
    throw configuration_error(describe("complete_in_transaction", id) + ": " + problem);
  auto* own = static_cast<sqlite_transaction*>(&tx);
  const record_key key(id);
  try {
    sqlite3* db = own->connection();
    int changed = 0;
    {
      bound_statement up(db, statement::complete, s.options.table, "prepare the completion");
      try {
        changed = run_complete(up, key, token, value, ttl, clock_ms());
      } catch (const sqlite_failure& f) {
        if (f.code() == SQLITE_BUSY_SNAPSHOT)
          throw sqlite_failure(f.code(), std::string(f.what()) +
                                             "; the sqlite_transaction read the database before another connection "
                                             "committed (such as the claim of this record), so SQLite cannot let it "
                                             "write: begin the transaction's work after the idempotent call");
        throw;
      }
    }
    if (changed == 0)
      throw lease_lost_error(
          describe("complete_in_transaction", id) + ": " + lost_reason(nullptr, db, s.options.table, key, token),
          "complete_in_transaction", id.to_string());
  } catch (const sqlite_failure& f) {
    s.unavailable("complete_in_transaction", &id, f.what());
  }
  own->after_commit([waiters = s.waiters, name = key.waiter_name(), token] {
    waiters->drop(token);
    waiters->notify(name);
  });
}

std::string sqlite_store::join_problem(const transaction& tx) const {
  const auto* own = dynamic_cast<const sqlite_transaction*>(&tx);
  if (own == nullptr)
    return "sqlite_store joins only an idem::sqlite_transaction, and this transaction is of another type; open "
           "the transaction with idem::sqlite_transaction on a connection to the store's database";
  if (!own->active()) return "the sqlite_transaction is no longer active";
  sqlite3* db = own->connection();
  const std::string& filename = state_->filename;
  if (!same_file(db, filename)) {
    const std::string_view theirs = main_file(db);
    return "the sqlite_transaction's connection is on '" +
           std::string(theirs.empty() ? std::string_view("a temporary or in-memory database") : theirs) +
           "', not on the store's database '" + filename + "'";
  }
  if (sqlite3_db_readonly(db, "main") == 1)
    return "the sqlite_transaction's connection opened the store's database '" + filename +
           "' read-only, so it cannot write the record";
  return {};
}

bool sqlite_store::extend_in_transaction(const identity& id, const lease_token& token, milliseconds lease,
                                         transaction& tx) {
  if (!join_problem(tx).empty()) return extend(id, token, lease);
  state& s = *state_;
  auto& own = static_cast<sqlite_transaction&>(tx);
  const record_key key(id);
  bool extended = false;
  try {
    // On the caller's connection, inside its transaction: the UPDATE takes (or already holds) the
    // write lock, so nobody can take the record over before the transaction ends.
    sqlite3* db = own.connection();
    bound_statement up(db, statement::extend, s.options.table, "prepare the extension");
    const auto token_blob = token.to_bytes();
    key.bind(up);
    up.blob(3, token_blob.data(), token_blob.size());
    up.integer(4, saturating_add(clock_ms(), lease));
    try {
      up.step("extend the lease");
    } catch (const sqlite_failure& f) {
      if (f.code() == SQLITE_BUSY_SNAPSHOT)
        throw sqlite_failure(f.code(), std::string(f.what()) +
                                           "; the sqlite_transaction read the database before another connection "
                                           "committed, so SQLite cannot let it write");
      throw;
    }
    extended = up.changes() == 1;
  } catch (const sqlite_failure& f) {
    s.unavailable("extend_in_transaction", &id, f.what());
  }
  if (extended) {
    own.after_commit([waiters = s.waiters, token, lease] {
      if (waiters->holds(token)) waiters->hold(token, lease);
    });
  }
  return extended;
}

}  // namespace idem

// --- asynchronous calls ---------------------------------------------------------------------------

namespace idem {

// One asynchronous try_acquire: attempts (acquire_attempts::next) on the store's workers, waits as
// a registration on the record's waiters plus a timer. Every step but the attempt itself runs under
// `mutex`; a `generation` tells a wake-up that is still current from one that lost the race.
struct sqlite_store::async_acquire : std::enable_shared_from_this<async_acquire> {
  async_acquire(sqlite_store& store, const context& c, cancellation* cancel_request,
                async_handler<acquire_result> handler)
      : owner(store), s(*store.state_), ctx(c), cancel(cancel_request), done(std::move(handler)),
        deadline(deadline_after(ctx.wait)) {}

  sqlite_store& owner;
  state& s;
  const context ctx;  // a copy: the caller's may be gone before the answer
  cancellation* const cancel;
  async_handler<acquire_result> done;
  const steady::time_point deadline;

  std::mutex mutex;
  bool finished = false;
  bool attempting = false;  // an attempt runs now, outside the lock: `attempts` must stay
  std::optional<acquire_attempts> attempts;
  detail::timer_queue::timer timer;
  std::uint64_t generation = 0;

  void start() {
    if (!detail::install_cancellation(cancel, ctx, shared_from_this(), &async_acquire::cancelled)) {
      done(std::make_exception_ptr(operation_cancelled()), acquire_result{in_flight{}});
      return;
    }
    if (!s.pending.add(shared_from_this())) return end_early(std::make_exception_ptr(destroyed_error()));
    post_attempt();
  }

  void post_attempt() {
    try {
      s.workers.post([self = shared_from_this()] { self->attempt(); });
    } catch (...) {
      end_early(std::current_exception());
    }
  }

  // On a worker: one look (and claim), then the answer or the next wait.
  void attempt() {
    {
      std::lock_guard lock(mutex);
      if (finished) return;
      attempting = true;
    }
    std::exception_ptr error;
    acquire_attempts::step next{acquire_result{in_flight{}}};
    try {
      if (!attempts) attempts.emplace(s, ctx, deadline);
      next = attempts->next();
    } catch (const sqlite_failure& f) {
      try {
        s.unavailable("try_acquire", &ctx.id, f.what());
      } catch (...) {
        error = std::current_exception();
      }
    } catch (...) {
      error = std::current_exception();
    }
    std::unique_lock lock(mutex);
    attempting = false;
    if (finished) {  // cancelled, or the store is going: a record claimed meanwhile is given back
      attempts.reset();
      lock.unlock();
      auto* answer = std::get_if<acquire_result>(&next);
      auto* got = answer != nullptr ? std::get_if<acquired>(answer) : nullptr;
      if (got != nullptr && error == nullptr) release_quietly(got->token);
      return;
    }
    if (error) return finish(lock, std::move(error), acquire_result{in_flight{}});
    if (auto* answer = std::get_if<acquire_result>(&next)) return finish(lock, nullptr, std::move(*answer));
    const auto wait = std::get<acquire_attempts::wait_for>(next);
    const std::uint64_t current = ++generation;
    auto self = shared_from_this();
    if (!attempts->enrollment().notify_on_change(wait.seen, [self, current] { self->woken(current, true); })) {
      attempts->woken(true);  // it moved already
      lock.unlock();
      post_attempt();
      return;
    }
    try {
      timer = s.timers.schedule(wait.until, [self, current] { self->woken(current, false); });
    } catch (...) {
      finish(lock, std::current_exception(), acquire_result{in_flight{}});
    }
  }

  // The record changed (`notified`) or the wait's time came.
  void woken(std::uint64_t which, bool notified) {
    {
      std::lock_guard lock(mutex);
      if (finished || which != generation) return;
      ++generation;  // the other of the two is stale now
      stop_waiting_locked();
      attempts->woken(notified);
    }
    post_attempt();
  }

  void cancelled() { end_early(std::make_exception_ptr(operation_cancelled())); }

  store_unavailable_error destroyed_error() const {
    return store_unavailable_error(
        describe("try_acquire", ctx.id) + ": the store was destroyed while the caller waited", "try_acquire",
        ctx.id.to_string());
  }

  // Cancelled, or the store is going.
  void end_early(std::exception_ptr why) {
    std::unique_lock lock(mutex);
    if (finished) return;
    finish(lock, std::move(why), acquire_result{in_flight{}});
  }

  void stop_waiting_locked() {
    if (timer) s.timers.cancel(timer);
    timer = {};
    if (attempts) attempts->enrollment().cancel_notify();
  }

  // Ends the call: called with the lock held, answers without it.
  void finish(std::unique_lock<std::mutex>& lock, std::exception_ptr error, acquire_result result) {
    finished = true;
    ++generation;
    stop_waiting_locked();
    if (!attempting) attempts.reset();  // else the attempt running now lets go of it
    lock.unlock();
    s.pending.remove(shared_from_this());
    if (detail::can_cancel(cancel, ctx)) cancel->clear();
    done(std::move(error), std::move(result));
  }

  // A store being destroyed keeps the record in progress until its lease expires.
  void release_quietly(const lease_token& token) {
    if (s.pending.stopping()) return;
    try {
      owner.release(ctx.id, token);
    } catch (...) {
      // It stays in progress until its lease expires.
    }
  }
};

sqlite_store::state::~state() {
  const auto left = pending.take_all();
  timers.stop();  // drops the waits' timers: they are answered here
  for (const auto& op : left) op->end_early(std::make_exception_ptr(op->destroyed_error()));
}

void sqlite_store::async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) {
  std::make_shared<async_acquire>(*this, ctx, cancel, std::move(done))->start();
}

void sqlite_store::async_complete(const identity& id, const lease_token& token, const payload& value,
                                  milliseconds ttl, async_done done) {
  state_->workers.run_and_report([this, id, token, value, ttl] { complete(id, token, value, ttl); }, std::move(done));
}

void sqlite_store::async_release(const identity& id, const lease_token& token, async_done done) {
  state_->workers.run_and_report([this, id, token] { release(id, token); }, std::move(done));
}

}  // namespace idem
