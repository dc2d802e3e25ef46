// runtime/postgres/pg_connection.hpp — libpq with deadlines: RAII handles, connecting and
// running one statement, each bounded by a steady-clock deadline.
//
// Nothing here blocks without a bound: connecting uses PQconnectStartParams/PQconnectPoll and
// statements are sent and read in non-blocking mode with poll(2) on the socket, so a server that
// is down, unreachable or stuck answers with a pg_error when the deadline passes.
#pragma once

#include <libpq-fe.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <idem/lease_token.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::detail::pg {

using steady = std::chrono::steady_clock;

struct result_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using result_ptr = std::unique_ptr<PGresult, result_deleter>;

struct connection_deleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
using connection_ptr = std::unique_ptr<PGconn, connection_deleter>;

// How a call to the server failed.
enum class failure {
  connect_failed,   // no connection could be opened: nothing was sent
  connection_lost,  // an open connection broke: a statement may or may not have run
  timeout,          // the deadline passed before the server answered
  server,           // the server answered with an error; sqlstate() says which
};

// pg_error
//
// What went wrong talking to the server. The message is libpq's or the server's primary message;
// it never contains statement parameters.
class pg_error : public std::runtime_error {
 public:
  pg_error(failure kind, const std::string& message, std::string sqlstate = {});
  failure kind() const noexcept { return kind_; }
  const std::string& sqlstate() const noexcept { return sqlstate_; }
  // True when the statement had been sent and no answer came (a timeout or a lost connection
  // after the send): the server may run it or have run it.
  bool outcome_unknown() const noexcept { return outcome_unknown_; }
  void set_outcome_unknown() noexcept { outcome_unknown_ = true; }

 private:
  failure kind_;
  std::string sqlstate_;
  bool outcome_unknown_ = false;
};

// True for SQLSTATEs that mean "another session got there first": unique violation,
// serialization failure, deadlock, lock timeout, statement timeout.
bool is_lost_race(std::string_view sqlstate) noexcept;
// True for SQLSTATEs that mean the idem schema is missing (undefined table or function).
bool is_missing_schema(std::string_view sqlstate) noexcept;

// connect_params
//
// A parsed conninfo plus settings idem adds. Copyable; connect() may be called from any thread.
class connect_params {
 public:
  // Parses a keyword/value string or a postgresql:// URI. Throws configuration_error with
  // libpq's reason when it does not parse.
  static connect_params parse(const std::string& conninfo);

  // Sets `keyword` unless the conninfo already set it.
  void set_default(const std::string& keyword, const std::string& value);
  // Appends a server option such as "-c statement_timeout=5000" to the `options` keyword.
  void append_server_option(const std::string& option);

  // Opens a connection, failing with pg_error{connect_failed} or {timeout} at `deadline`. The
  // connection comes back in non-blocking mode with notices silenced. If `cancel_fd` >= 0 and
  // becomes readable meanwhile, gives up at once with pg_error{connect_failed}.
  connection_ptr connect(steady::time_point deadline, int cancel_fd = -1) const;

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

// param_list
//
// Statement parameters, all in binary format. Values are copied; strings may hold any bytes.
class param_list {
 public:
  param_list& text(std::string_view value);
  param_list& bytes(const unsigned char* data, std::size_t size);
  param_list& bytes(std::string_view value);
  param_list& int8(std::int64_t value);
  param_list& uuid(const lease_token& token);
  param_list& null();

  int size() const noexcept { return static_cast<int>(storage_.size()); }
  // Pointers for libpq; valid until the list changes.
  const char* const* values() const;
  const int* lengths() const noexcept { return lengths_.data(); }
  const int* formats() const noexcept { return formats_.data(); }

 private:
  std::vector<std::string> storage_;
  std::vector<bool> is_null_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
  mutable std::vector<const char*> values_;
};

// exchange
//
// One statement in flight on a non-blocking connection: sent when made, then advanced without
// blocking as the socket allows until its results are in. The blocking calls below and the
// store's asynchronous calls drive the same object, each waiting for the socket its own way.
class exchange {
 public:
  enum class need { readable, writable, nothing };
  // Each sends a statement (into libpq's buffer); throws pg_error{connection_lost} if it cannot.
  static exchange prepare(PGconn* conn, const char* name, const char* sql, int param_count, const Oid* types);
  static exchange query_prepared(PGconn* conn, const char* name, const param_list& params);
  static exchange query_params(PGconn* conn, const char* sql, const Oid* types, const param_list& params);
  static exchange query(PGconn* conn, const char* sql);

  // Sends what is unsent, reads what arrived, collects the finished results, and says what it
  // waits for next: `nothing` once every result is in. Throws pg_error{connection_lost}.
  need advance();
  // Once advance() said `nothing`: the last result, or the first error as a pg_error.
  result_ptr take();
  PGconn* connection() const noexcept { return conn_; }

 private:
  explicit exchange(PGconn* conn) noexcept : conn_(conn) {}
  PGconn* conn_;
  result_ptr last_;
  result_ptr first_error_;
  bool flushed_ = false;
  bool awaiting_input_ = false;  // advance() asked for readable: read before looking
};

// A pg_error{timeout} saying what was waited for.
pg_error timeout_error(std::string_view what);

// Prepares `sql` as `name` on `conn`. Throws pg_error.
void prepare(PGconn* conn, const char* name, const char* sql, int param_count, const Oid* types,
             steady::time_point deadline);

// Runs the prepared statement `name` and returns its result (binary format). Throws pg_error for
// any failure, including an error answer from the server.
result_ptr exec_prepared(PGconn* conn, const char* name, const param_list& params, steady::time_point deadline);

// Asks the server to cancel the statement running on a connection without blocking
// (cancel_worker::request: PQcancel itself blocks while the server is frozen). The future becomes
// true once the postmaster has taken the request.
using canceller = std::function<std::future<bool>(PGconn*)>;

// Runs `sql` with `params` as an unnamed statement (binary results). With `cancel_on_timeout`, a
// statement still running at the deadline is cancelled through it, and its result and the
// postmaster's acceptance of the cancel are awaited for at most 2 s more, so that the connection
// stays usable (for a caller's own connection) and no late cancel hits a later statement;
// otherwise, or if either does not come in time, the call fails with a timeout.
result_ptr exec_params(PGconn* conn, const char* sql, const Oid* types, const param_list& params,
                       steady::time_point deadline, const canceller* cancel_on_timeout = nullptr);

// Runs `sql`, which may hold several statements (simple query protocol), and returns the last
// result. Throws pg_error at the first failing statement.
result_ptr exec_simple(PGconn* conn, const char* sql, steady::time_point deadline);

// True if an idle pooled connection still looks usable without a round trip: its status is OK,
// no transaction is open, and the server has not closed it (checked with a zero-timeout poll).
bool idle_connection_alive(PGconn* conn);

// Readers of binary-format result fields.
bool is_null(const PGresult* r, int row, int column) noexcept;
std::string get_bytes(const PGresult* r, int row, int column);
std::int64_t get_int8(const PGresult* r, int row, int column);
bool get_bool(const PGresult* r, int row, int column);

// PostgreSQL type OIDs used by idem's statements.
inline constexpr Oid oid_bool = 16;
inline constexpr Oid oid_bytea = 17;
inline constexpr Oid oid_int8 = 20;
inline constexpr Oid oid_text = 25;
inline constexpr Oid oid_uuid = 2950;

}  // namespace idem::detail::pg
