// runtime/sqlite/sqlite_connection.cpp
#include "sqlite_connection.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <climits>
#include <utility>

namespace idem::detail {

sqlite_failure failure_of(sqlite3* db, int code, std::string_view doing) {
  std::string message(doing);
  message += ": ";
  message += (db != nullptr) ? sqlite3_errmsg(db) : sqlite3_errstr(code);
  message += " (SQLite error ";
  message += std::to_string(code);
  message += ')';
  return sqlite_failure(code, std::move(message));
}

namespace {

// What administration reads of a record (columns 0..9; admin_select adds the payload's 10, 11).
constexpr std::string_view admin_columns =
    "scope, key_digest, state, lease_expires_at, expires_at, fingerprint IS NOT NULL, payload_type,"
    " length(CAST(payload_body AS BLOB)), completed_at, created_at";

}  // namespace

std::string statement_sql(statement which, std::string_view table_name) {
  const std::string t(table_name);
  switch (which) {
    case statement::begin_immediate:
      return "BEGIN IMMEDIATE";
    case statement::commit:
      return "COMMIT";
    case statement::rollback:
      return "ROLLBACK";
    case statement::select_record:
      return "SELECT state, lease_token, lease_expires_at, expires_at, fingerprint, payload_type, payload_body,"
             " payload_attributes, completed_at FROM " +
             t + " WHERE scope = ?1 AND key_digest = ?2";
    case statement::claim:
      // Inserts a fresh record, or takes over one that is complete past its ttl or whose lease has
      // expired; leaves a live record untouched (0 changes).
      return "INSERT INTO " + t +
             " (scope, key_digest, state, lease_token, lease_expires_at, expires_at, fingerprint, created_at)"
             " VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7)"
             " ON CONFLICT (scope, key_digest) DO UPDATE SET state = 1, lease_token = excluded.lease_token,"
             " lease_expires_at = excluded.lease_expires_at, expires_at = excluded.expires_at,"
             " fingerprint = excluded.fingerprint, payload_type = NULL, payload_body = NULL,"
             " payload_attributes = NULL, completed_at = NULL, created_at = excluded.created_at"
             " WHERE (" +
             t + ".state = 2 AND " + t +
             ".expires_at <= ?7)"
             " OR (" +
             t + ".state = 1 AND " + t + ".lease_expires_at <= ?7)";
    case statement::complete:
      return "UPDATE " + t +
             " SET state = 2, payload_type = ?4, payload_body = ?5, payload_attributes = ?6, completed_at = ?7,"
             " expires_at = ?8, lease_token = NULL, lease_expires_at = NULL"
             " WHERE scope = ?1 AND key_digest = ?2 AND state = 1 AND lease_token = ?3";
    case statement::release:
      return "DELETE FROM " + t + " WHERE scope = ?1 AND key_digest = ?2 AND state = 1 AND lease_token = ?3";
    case statement::extend:
      return "UPDATE " + t +
             " SET lease_expires_at = ?4"
             " WHERE scope = ?1 AND key_digest = ?2 AND state = 1 AND lease_token = ?3";
    case statement::inspect:
      return "SELECT state, lease_token FROM " + t + " WHERE scope = ?1 AND key_digest = ?2";
    case statement::purge_batch:
      return "DELETE FROM " + t + " WHERE (scope, key_digest) IN (SELECT scope, key_digest FROM " + t +
             " WHERE expires_at <= ?1 AND (state = 2 OR lease_expires_at <= ?1) LIMIT ?2)";
    case statement::admin_select:
      return "SELECT " + std::string(admin_columns) + ", payload_body, payload_attributes FROM " + t +
             " WHERE scope = ?1 AND key_digest = ?2";
    case statement::admin_list:
      // ?1 scope or NULL, ?2 state or NULL, ?3 created at or before, ?4 limit.
      return "SELECT " + std::string(admin_columns) + " FROM " + t +
             " WHERE (?1 IS NULL OR scope = ?1) AND (?2 IS NULL OR state = ?2) AND created_at <= ?3"
             " ORDER BY created_at, scope, key_digest LIMIT ?4";
    case statement::admin_release:
      // ?3 now, ?4 1 to end a live lease too.
      return "DELETE FROM " + t + " WHERE scope = ?1 AND key_digest = ?2 AND state = 1 AND (lease_expires_at <= ?3 OR ?4)";
    case statement::admin_count:
      // The states of record_counts::add (store_admin.cpp), in SQL.
      return "SELECT coalesce(sum(state = 1 AND lease_expires_at > ?1), 0),"
             " coalesce(sum(state = 1 AND lease_expires_at <= ?1 AND expires_at > ?1), 0),"
             " coalesce(sum(state = 2 AND expires_at > ?1), 0),"
             " coalesce(sum(expires_at <= ?1 AND (state = 2 OR lease_expires_at <= ?1)), 0) FROM " + t;
  }
  return {};
}

namespace {

std::string schema_sql(std::string_view table_name) {
  const std::string t(table_name);
  // state: 1 = in progress, 2 = complete. Times are milliseconds since the Unix epoch on the
  // system clock. key_digest is the SHA-256 of the key: the raw key is never stored.
  return "CREATE TABLE IF NOT EXISTS " + t +
         " ("
         " scope TEXT NOT NULL,"
         " key_digest BLOB NOT NULL,"
         " state INTEGER NOT NULL,"
         " lease_token BLOB,"
         " lease_expires_at INTEGER,"
         " expires_at INTEGER NOT NULL,"
         " fingerprint TEXT,"
         " payload_type TEXT,"
         " payload_body BLOB,"
         " payload_attributes BLOB,"
         " completed_at INTEGER,"
         " created_at INTEGER NOT NULL,"
         " PRIMARY KEY (scope, key_digest));"
         "CREATE INDEX IF NOT EXISTS " +
         t + "_expires_at ON " + t + " (expires_at);";
}

// Whether the table and its index already exist: then opening writes nothing, so a store can open
// while another process holds the file's write lock.
bool schema_present(sqlite3* db, const std::string& table) {
  sqlite3_stmt* s = nullptr;
  const char* sql = "SELECT count(*) FROM sqlite_master WHERE (type = 'table' AND name = ?1) OR (type = 'index' AND "
                    "name = ?1 || '_expires_at')";
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) return false;
  sqlite3_bind_text(s, 1, table.c_str(), static_cast<int>(table.size()), SQLITE_TRANSIENT);
  const bool present = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) == 2;
  sqlite3_finalize(s);
  return present;
}

int clamp_ms(std::chrono::milliseconds timeout) noexcept {
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(timeout.count(), 0, INT_MAX));
}

}  // namespace

sqlite_connection::sqlite_connection(const connection_settings& settings, bool initialise) {
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  const int rc = sqlite3_open_v2(settings.path.c_str(), &db_, flags, nullptr);
  try {
    if (rc != SQLITE_OK) throw failure_of(db_, rc, "sqlite3_open_v2");
    sqlite3_extended_result_codes(db_, 1);
    if (sqlite3_db_readonly(db_, "main") == 1)
      throw sqlite_failure(SQLITE_READONLY, "the database is read-only: idem needs to write to it");
    sqlite3_busy_timeout(db_, clamp_ms(settings.busy_timeout));

    if (initialise) {
      sqlite3_stmt* wal = nullptr;
      int r = sqlite3_prepare_v2(db_, "PRAGMA journal_mode = WAL", -1, &wal, nullptr);
      if (r != SQLITE_OK) throw failure_of(db_, r, "cannot read the database");
      r = sqlite3_step(wal);
      std::string mode;
      if (r == SQLITE_ROW) mode = reinterpret_cast<const char*>(sqlite3_column_text(wal, 0));
      if (r != SQLITE_ROW) {
        sqlite_failure failure = failure_of(db_, r, "cannot switch the database to WAL");
        sqlite3_finalize(wal);
        throw failure;
      }
      sqlite3_finalize(wal);
      if (mode != "wal")
        throw sqlite_failure(SQLITE_ERROR, "cannot switch the database to WAL: the journal mode stayed '" + mode + "'");
    }
    const char* sync =
        settings.synchronous == sqlite_synchronous::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL";
    if (int r = sqlite3_exec(db_, sync, nullptr, nullptr, nullptr); r != SQLITE_OK)
      throw failure_of(db_, r, "cannot set PRAGMA synchronous");

    if (initialise && !schema_present(db_, settings.table)) {
      const std::string ddl = "BEGIN IMMEDIATE;" + schema_sql(settings.table) + "COMMIT;";
      if (int r = sqlite3_exec(db_, ddl.c_str(), nullptr, nullptr, nullptr); r != SQLITE_OK) {
        sqlite_failure failure = failure_of(db_, r, "cannot create the table '" + settings.table + "'");
        if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        throw failure;
      }
    }
    for (std::size_t i = 0; i < statement_count; ++i) {
      const std::string sql = statement_sql(static_cast<statement>(i), settings.table);
      const int r = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size() + 1), SQLITE_PREPARE_PERSISTENT,
                                       &statements_[i], nullptr);
      if (r != SQLITE_OK) throw failure_of(db_, r, "the table '" + settings.table + "' does not have idem's schema");
    }
  } catch (...) {
    for (sqlite3_stmt* s : statements_) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
    throw;
  }
}

sqlite_connection::~sqlite_connection() {
  for (sqlite3_stmt* s : statements_) sqlite3_finalize(s);
  sqlite3_close_v2(db_);
}

void sqlite_connection::busy_timeout(std::chrono::milliseconds timeout) {
  sqlite3_busy_timeout(db_, clamp_ms(timeout));
}

void sqlite_connection::eager_busy_wait(std::chrono::steady_clock::time_point deadline) {
  eager_deadline_ = deadline;
  sqlite3_busy_handler(
      db_,
      [](void* self, int) -> int {
        const auto until = static_cast<sqlite_connection*>(self)->eager_deadline_;
        if (std::chrono::steady_clock::now() >= until) return 0;
        sqlite3_sleep(1);
        return 1;
      },
      this);
}

void sqlite_connection::run(statement which, std::string_view doing) {
  if (int rc = try_run(which); rc != SQLITE_OK) throw failure_of(db_, rc, doing);
}

int sqlite_connection::try_run(statement which) noexcept {
  sqlite3_stmt* stmt = get(which);
  int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  return (rc == SQLITE_DONE || rc == SQLITE_ROW) ? SQLITE_OK : rc;
}

bound_statement::bound_statement(sqlite3* db, statement which, std::string_view table, std::string_view doing)
    : db_(db), owned_(true) {
  const std::string sql = statement_sql(which, table);
  const int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size() + 1), &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    sqlite_failure failure = failure_of(db_, rc, doing);
    sqlite3_finalize(stmt_);
    throw failure;
  }
}

bound_statement::~bound_statement() {
  if (owned_) {
    sqlite3_finalize(stmt_);
    return;
  }
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void bound_statement::text(int index, std::string_view value) {
  // A std::string_view of an empty std::string still points somewhere, so this binds '' not NULL.
  sqlite3_bind_text64(stmt_, index, value.data() != nullptr ? value.data() : "", value.size(), SQLITE_STATIC,
                      SQLITE_UTF8);
}

void bound_statement::blob(int index, const void* data, std::size_t size) {
  static const char empty = 0;
  sqlite3_bind_blob64(stmt_, index, data != nullptr ? data : &empty, size, SQLITE_STATIC);
}

void bound_statement::integer(int index, std::int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
}

void bound_statement::null(int index) {
  sqlite3_bind_null(stmt_, index);
}

bool bound_statement::step(std::string_view doing) {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw failure_of(db_, rc, doing);
}

bool bound_statement::is_null(int column) const noexcept {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t bound_statement::integer(int column) const noexcept {
  return sqlite3_column_int64(stmt_, column);
}

std::string bound_statement::bytes(int column) const {
  switch (sqlite3_column_type(stmt_, column)) {
    case SQLITE_NULL:
      return {};
    case SQLITE_BLOB: {
      const void* data = sqlite3_column_blob(stmt_, column);
      const int size = sqlite3_column_bytes(stmt_, column);
      if (data == nullptr || size <= 0) return {};
      return std::string(static_cast<const char*>(data), static_cast<std::size_t>(size));
    }
    default: {
      const unsigned char* data = sqlite3_column_text(stmt_, column);
      const int size = sqlite3_column_bytes(stmt_, column);
      if (data == nullptr || size <= 0) return {};
      return std::string(reinterpret_cast<const char*>(data), static_cast<std::size_t>(size));
    }
  }
}

int bound_statement::changes() const noexcept {
  return sqlite3_changes(db_);
}

connection_pool::connection_pool(connection_settings settings, std::size_t capacity,
                                 std::unique_ptr<sqlite_connection> first)
    : settings_(std::move(settings)), capacity_(std::max<std::size_t>(capacity, 1)) {
  idle_.reserve(capacity_);
  idle_.push_back(std::move(first));
  opened_ = 1;
}

connection_pool::loan connection_pool::borrow(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (!idle_.empty()) {
      std::unique_ptr<sqlite_connection> c = std::move(idle_.back());
      idle_.pop_back();
      return loan(*this, std::move(c));
    }
    if (opened_ < capacity_) break;
    if (!returned_.wait_until(lock, deadline, [&] { return !idle_.empty() || opened_ < capacity_; }))
      throw sqlite_failure(SQLITE_BUSY, "no pooled connection became free in time");
  }
  ++opened_;
  lock.unlock();
  try {
    return loan(*this, std::make_unique<sqlite_connection>(settings_, false));
  } catch (...) {
    lock.lock();
    --opened_;
    returned_.notify_one();
    throw;
  }
}

void connection_pool::give_back(std::unique_ptr<sqlite_connection> connection) noexcept {
  {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(connection));
  }
  returned_.notify_one();
}

connection_pool::loan::~loan() {
  if (!connection_) return;
  if (sqlite3_get_autocommit(connection_->handle()) == 0) connection_->try_run(statement::rollback);
  connection_->busy_timeout(pool_->settings_.busy_timeout);
  pool_->give_back(std::move(connection_));
}

}  // namespace idem::detail
