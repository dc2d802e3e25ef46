// runtime/sqlite/sqlite_store.cpp — idem::sqlite_store.
//
// Claim-or-replay reads the record first, on any pooled connection and without the write lock
// (WAL readers never wait for writers): a live complete record is a duplicate, a live lease is
// waited for. Only a claimable record (absent, complete past its ttl, lease expired) takes the
// write lock, in BEGIN IMMEDIATE, where one upsert claims it atomically or leaves a live record
// alone. The store's writers queue on one in-process mutex before they ask SQLite for the lock,
// so SQLite's sleeping busy handler only ever arbitrates between processes and application
// transactions.
#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>
#include <idem/transaction.hpp>
#include <string>

#include "store_parts.hpp"

namespace idem {

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

void sqlite_store::complete(const identity& id, const lease_token& token, const payload& value, milliseconds ttl) {
  state& s = *state_;
  const record_key key(id);
  try {
    s.refuse_self_lock("complete", id);
    write_transaction tx(s.writer, s.pool, s.options.busy_timeout, deadline_after(s.options.busy_timeout),
                         "begin the completion");
    s.require_locked(tx, "complete", id);
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
    s.require_locked(tx, "release", id);
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
    // re-try every millisecond rather than sleep through other writers' gaps (with
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
