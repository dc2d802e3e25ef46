// runtime/sqlite/sqlite_connection.hpp — the store's connections, their prepared statements, and
// the pool that hands them out.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <idem/sqlite_store.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace idem::detail {

// A failure reported by SQLite, before the store turns it into a store error that names the
// operation and the record.
class sqlite_failure : public std::exception {
 public:
  sqlite_failure(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code() const noexcept { return code_; }  // extended result code
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  int code_;
  std::string message_;
};

// Builds a sqlite_failure from the connection's last error: "<doing>: <errmsg> (<code name>)".
sqlite_failure failure_of(sqlite3* db, int code, std::string_view doing);

// The statements every connection prepares once.
enum class statement : std::size_t {
  begin_immediate,
  commit,
  rollback,
  select_record,
  claim,
  complete,
  release,
  extend,
  inspect,
  purge_batch,
  // Administration (administration.cpp): prepared when used, not by every connection.
  admin_select,
  admin_list,
  admin_release,
  admin_count,
};
// The statements every connection prepares when it opens.
inline constexpr std::size_t statement_count = static_cast<std::size_t>(statement::purge_batch) + 1;

// The text of `which` for the table `table`.
std::string statement_sql(statement which, std::string_view table);

// What a connection needs to open.
struct connection_settings {
  std::string path;  // as given to sqlite3_open_v2
  std::string table;
  sqlite_synchronous synchronous = sqlite_synchronous::full;
  std::chrono::milliseconds busy_timeout{5000};
};

// One connection of the store, opened in multi-thread mode (used by one thread at a time), with
// its statements prepared. Not copyable.
class sqlite_connection {
 public:
  // Opens the file; with `initialise`, also switches it to WAL and creates the schema.
  // Throws sqlite_failure.
  sqlite_connection(const connection_settings& settings, bool initialise);
  ~sqlite_connection();
  sqlite_connection(const sqlite_connection&) = delete;
  sqlite_connection& operator=(const sqlite_connection&) = delete;

  sqlite3* handle() const noexcept { return db_; }
  sqlite3_stmt* get(statement which) const noexcept { return statements_[static_cast<std::size_t>(which)]; }

  // Sets SQLite's busy timeout for the next statements (clamped to [0, INT_MAX] ms).
  void busy_timeout(std::chrono::milliseconds timeout);
  // Waits for the write lock until `deadline` by re-trying every millisecond, instead of SQLite's
  // backing-off sleeps (up to 100 ms each, during which another process can take the lock again
  // and again): a lease extension must not lose the race for the lock ~30 times in a row. The
  // next busy_timeout() call puts SQLite's handler back.
  void eager_busy_wait(std::chrono::steady_clock::time_point deadline);

  // Runs a statement that returns no rows (BEGIN IMMEDIATE, COMMIT, ROLLBACK). Throws sqlite_failure.
  void run(statement which, std::string_view doing);
  // The same, returning SQLite's result code instead of throwing.
  int try_run(statement which) noexcept;

 private:
  sqlite3* db_ = nullptr;
  std::chrono::steady_clock::time_point eager_deadline_{};
  std::array<sqlite3_stmt*, statement_count> statements_{};
};

// RAII use of a statement: binds, steps, and on exit resets and clears a cached statement or
// finalizes one prepared for this use only.
class bound_statement {
 public:
  // Uses the statement `which` cached by `connection`.
  bound_statement(const sqlite_connection& connection, statement which) noexcept
      : db_(connection.handle()), stmt_(connection.get(which)), owned_(false) {}
  // Prepares `which` for `table` on a connection idem does not own (an application's). Throws
  // sqlite_failure.
  bound_statement(sqlite3* db, statement which, std::string_view table, std::string_view doing);
  ~bound_statement();
  bound_statement(const bound_statement&) = delete;
  bound_statement& operator=(const bound_statement&) = delete;

  // Binders; the bytes must outlive the statement's use (SQLITE_STATIC).
  void text(int index, std::string_view value);
  void blob(int index, const void* data, std::size_t size);
  void integer(int index, std::int64_t value);
  void null(int index);

  // Steps once: true for a row, false when done. Throws sqlite_failure.
  bool step(std::string_view doing);

  // Column readers for the current row.
  bool is_null(int column) const noexcept;
  std::int64_t integer(int column) const noexcept;
  std::string bytes(int column) const;  // text or blob, empty for NULL

  int changes() const noexcept;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  bool owned_;
};

// A bounded pool of connections, opened lazily up to its capacity.
class connection_pool {
 public:
  connection_pool(connection_settings settings, std::size_t capacity, std::unique_ptr<sqlite_connection> first);

  // A connection on loan; returned to the pool on destruction (rolled back first if a transaction
  // was left open).
  class loan {
   public:
    loan(connection_pool& pool, std::unique_ptr<sqlite_connection> connection) noexcept
        : pool_(&pool), connection_(std::move(connection)) {}
    loan(loan&&) noexcept = default;
    loan& operator=(loan&&) = delete;
    loan(const loan&) = delete;
    loan& operator=(const loan&) = delete;
    ~loan();
    sqlite_connection& operator*() const noexcept { return *connection_; }
    sqlite_connection* operator->() const noexcept { return connection_.get(); }

   private:
    connection_pool* pool_;
    std::unique_ptr<sqlite_connection> connection_;
  };

  // Lends a connection, waiting until `deadline` for one to come back. Throws sqlite_failure
  // (SQLITE_BUSY) when none does, or when opening a new one fails.
  loan borrow(std::chrono::steady_clock::time_point deadline);

 private:
  void give_back(std::unique_ptr<sqlite_connection> connection) noexcept;

  connection_settings settings_;
  std::size_t capacity_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<sqlite_connection>> idle_;
  std::size_t opened_ = 0;
};

}  // namespace idem::detail
