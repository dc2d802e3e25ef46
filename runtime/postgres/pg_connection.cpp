// runtime/postgres/pg_connection.cpp — libpq with deadlines.
#include "pg_connection.hpp"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <idem/deadline.hpp>
#include <idem/errors.hpp>

namespace idem::detail::pg {
namespace {

// libpq's messages end with a newline and may span lines; keep them to one line.
std::string one_line(const char* text) {
  std::string s = text != nullptr ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s.empty() ? std::string("no message from libpq") : s;
}

std::string connection_message(PGconn* conn) {
  return one_line(PQerrorMessage(conn));
}

void ignore_notice(void*, const char*) {}

constexpr int wait_cancelled = 1 << 30;  // wait_socket's answer when `cancel_fd` became readable

// Waits for `events` on `fd` until `deadline`. Returns the ready events, 0 on timeout, -1 on a
// poll error (errno set), `wait_cancelled` if `cancel_fd` (when >= 0) became readable.
int wait_socket(int fd, short events, steady::time_point deadline, int cancel_fd = -1) {
  for (;;) {
    const auto now = steady::now();
    if (now >= deadline) return 0;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd p[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    const int n = ::poll(p, cancel_fd >= 0 ? 2 : 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
    if (n > 0) return (cancel_fd >= 0 && p[1].revents != 0) ? wait_cancelled : p[0].revents;
    if (n < 0 && errno != EINTR) return -1;
  }
}

// Turns an error result into a pg_error: a broken connection, or the server's own error.
pg_error error_from(PGconn* conn, const PGresult* r) {
  if (PQstatus(conn) == CONNECTION_BAD)
    return pg_error(failure::connection_lost, fmt::format("connection lost: {}", connection_message(conn)));
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  std::string message = primary != nullptr ? one_line(primary) : one_line(PQresultErrorMessage(r));
  std::string sqlstate = state != nullptr ? state : "";
  if (!sqlstate.empty()) message += fmt::format(" (SQLSTATE {})", sqlstate);
  // Class 08 (connection exception) and 57P01-57P03 (server shutting down) end the session.
  if (sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03")
    return pg_error(failure::connection_lost, message, sqlstate);
  return pg_error(failure::server, message, sqlstate);
}

bool is_error(const PGresult* r) {
  const ExecStatusType s = PQresultStatus(r);
  return s == PGRES_BAD_RESPONSE || s == PGRES_NONFATAL_ERROR || s == PGRES_FATAL_ERROR;
}

// Drives `x` to its results, waiting on the socket with poll(2) until `deadline`. With
// `cancel_on_timeout`, a statement still running at the deadline is cancelled and its (error)
// result collected for at most 2 s more, so that the connection stays usable.
result_ptr drive(exchange x, steady::time_point deadline, const canceller* cancel_on_timeout) {
  PGconn* conn = x.connection();
  bool cancelled = false;
  std::future<bool> cancel_sent;
  for (;;) {
    const exchange::need next = x.advance();
    if (next == exchange::need::nothing) break;
    // While sending, read too: the server must never stall writing to us.
    const short events = next == exchange::need::writable ? POLLIN | POLLOUT : POLLIN;
    const int ready = wait_socket(PQsocket(conn), events, deadline);
    if (ready > 0) continue;
    if (ready < 0) throw pg_error(failure::connection_lost, fmt::format("poll failed: {}", std::strerror(errno)));
    if (next == exchange::need::writable) throw timeout_error("sending");
    if (cancel_on_timeout == nullptr || cancelled) throw timeout_error("waiting for the result");
    // Keep a caller's connection usable: cancel, then collect the (error) result briefly. The
    // cancel is sent by another thread: a frozen postmaster would block PQcancel here for good.
    cancel_sent = (*cancel_on_timeout)(conn);
    cancelled = true;
    deadline = deadline_after(std::chrono::seconds(2));
  }
  if (cancelled) {
    // A cancel the postmaster has not taken yet could still hit the next statement.
    if (cancel_sent.valid() && cancel_sent.wait_until(deadline) == std::future_status::ready) cancel_sent.get();
    throw timeout_error("statement cancelled");
  }
  return x.take();
}

void check_sent(PGconn* conn, int sent) {
  if (sent == 0) throw pg_error(failure::connection_lost, fmt::format("could not send: {}", connection_message(conn)));
}

// Puts a caller's connection in non-blocking mode for one call and restores its mode after.
class nonblocking_scope {
 public:
  explicit nonblocking_scope(PGconn* conn) : conn_(conn), was_(PQisnonblocking(conn)) {
    if (was_ == 0) PQsetnonblocking(conn_, 1);
  }
  ~nonblocking_scope() {
    if (was_ == 0) PQsetnonblocking(conn_, 0);
  }
  nonblocking_scope(const nonblocking_scope&) = delete;
  nonblocking_scope& operator=(const nonblocking_scope&) = delete;

 private:
  PGconn* conn_;
  int was_;
};

}  // namespace

pg_error timeout_error(std::string_view what) {
  return pg_error(failure::timeout, fmt::format("no answer from the server in time ({})", what));
}

pg_error::pg_error(failure kind, const std::string& message, std::string sqlstate)
    : std::runtime_error(message), kind_(kind), sqlstate_(std::move(sqlstate)) {}

bool is_lost_race(std::string_view sqlstate) noexcept {
  return sqlstate == "23505" || sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03" ||
         sqlstate == "57014";
}

bool is_missing_schema(std::string_view sqlstate) noexcept {
  return sqlstate == "42P01" || sqlstate == "42883";
}

// ---------------------------------------------------------------------------------------------
// connect_params

connect_params connect_params::parse(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    std::string reason = error != nullptr ? one_line(error) : std::string("out of memory");
    PQfreemem(error);
    throw configuration_error(fmt::format("postgres_store: invalid conninfo: {}", reason));
  }
  connect_params params;
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) params.entries_.emplace_back(o->keyword, o->val);
  }
  PQconninfoFree(options);
  return params;
}

void connect_params::set_default(const std::string& keyword, const std::string& value) {
  for (const auto& [k, v] : entries_)
    if (k == keyword) return;
  entries_.emplace_back(keyword, value);
}

void connect_params::append_server_option(const std::string& option) {
  for (auto& [k, v] : entries_) {
    if (k == "options") {
      v = v.empty() ? option : v + " " + option;
      return;
    }
  }
  entries_.emplace_back("options", option);
}

connection_ptr connect_params::connect(steady::time_point deadline, int cancel_fd) const {
  std::vector<const char*> keywords;
  std::vector<const char*> values;
  for (const auto& [k, v] : entries_) {
    keywords.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);

  connection_ptr conn{PQconnectStartParams(keywords.data(), values.data(), 0)};
  if (!conn) throw pg_error(failure::connect_failed, "could not connect: out of memory");
  if (PQstatus(conn.get()) == CONNECTION_BAD)
    throw pg_error(failure::connect_failed, fmt::format("could not connect: {}", connection_message(conn.get())));
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK) {
    if (status == PGRES_POLLING_FAILED)
      throw pg_error(failure::connect_failed, fmt::format("could not connect: {}", connection_message(conn.get())));
    const short events = status == PGRES_POLLING_READING ? POLLIN : POLLOUT;
    const int ready = wait_socket(PQsocket(conn.get()), events, deadline, cancel_fd);
    if (ready == wait_cancelled) throw pg_error(failure::connect_failed, "could not connect: cancelled");
    if (ready == 0) throw pg_error(failure::timeout, "could not connect: the server did not answer in time");
    if (ready < 0) throw pg_error(failure::connect_failed, fmt::format("could not connect: {}", std::strerror(errno)));
    status = PQconnectPoll(conn.get());
  }
  PQsetNoticeProcessor(conn.get(), ignore_notice, nullptr);
  if (PQsetnonblocking(conn.get(), 1) != 0)
    throw pg_error(failure::connect_failed, fmt::format("could not connect: {}", connection_message(conn.get())));
  return conn;
}

// ---------------------------------------------------------------------------------------------
// param_list

param_list& param_list::text(std::string_view value) {
  return bytes(value);
}

param_list& param_list::bytes(const unsigned char* data, std::size_t size) {
  return bytes(std::string_view(reinterpret_cast<const char*>(data), size));
}

param_list& param_list::bytes(std::string_view value) {
  storage_.emplace_back(value);
  is_null_.push_back(false);
  lengths_.push_back(static_cast<int>(value.size()));
  formats_.push_back(1);
  values_.clear();
  return *this;
}

param_list& param_list::int8(std::int64_t value) {
  const auto u = static_cast<std::uint64_t>(value);
  std::string be(8, '\0');
  for (int i = 0; i < 8; ++i) be[static_cast<std::size_t>(i)] = static_cast<char>((u >> (56 - 8 * i)) & 0xff);
  return bytes(be);
}

param_list& param_list::uuid(const lease_token& token) {
  const std::array<unsigned char, 16> be = token.to_bytes();  // a uuid's binary form is its 16 bytes
  return bytes(be.data(), be.size());
}

param_list& param_list::null() {
  storage_.emplace_back();
  is_null_.push_back(true);
  lengths_.push_back(0);
  formats_.push_back(1);
  values_.clear();
  return *this;
}

const char* const* param_list::values() const {
  values_.clear();
  for (std::size_t i = 0; i < storage_.size(); ++i) values_.push_back(is_null_[i] ? nullptr : storage_[i].data());
  return values_.data();
}

// ---------------------------------------------------------------------------------------------
// statements

exchange exchange::prepare(PGconn* conn, const char* name, const char* sql, int param_count, const Oid* types) {
  check_sent(conn, PQsendPrepare(conn, name, sql, param_count, types));
  return exchange(conn);
}

exchange exchange::query_prepared(PGconn* conn, const char* name, const param_list& params) {
  check_sent(conn,
             PQsendQueryPrepared(conn, name, params.size(), params.values(), params.lengths(), params.formats(), 1));
  return exchange(conn);
}

exchange exchange::query_params(PGconn* conn, const char* sql, const Oid* types, const param_list& params) {
  check_sent(
      conn, PQsendQueryParams(conn, sql, params.size(), types, params.values(), params.lengths(), params.formats(), 1));
  return exchange(conn);
}

exchange exchange::query(PGconn* conn, const char* sql) {
  check_sent(conn, PQsendQuery(conn, sql));
  return exchange(conn);
}

exchange::need exchange::advance() {
  if (!flushed_) {
    // PQflush reads input itself whenever the socket cannot take more, so the server never stalls.
    const int f = PQflush(conn_);
    if (f < 0) throw pg_error(failure::connection_lost, fmt::format("connection lost: {}", connection_message(conn_)));
    if (f > 0) return need::writable;
    flushed_ = true;
  }
  if (awaiting_input_ && PQconsumeInput(conn_) == 0)
    throw pg_error(failure::connection_lost, fmt::format("connection lost: {}", connection_message(conn_)));
  while (PQisBusy(conn_) == 0) {
    result_ptr r{PQgetResult(conn_)};
    if (!r) return need::nothing;
    if (is_error(r.get())) {
      if (!first_error_) first_error_ = std::move(r);
    } else {
      last_ = std::move(r);
    }
  }
  awaiting_input_ = true;
  return need::readable;
}

result_ptr exchange::take() {
  if (first_error_) throw error_from(conn_, first_error_.get());
  if (!last_) throw pg_error(failure::connection_lost, fmt::format("no result: {}", connection_message(conn_)));
  return std::move(last_);
}

void prepare(PGconn* conn, const char* name, const char* sql, int param_count, const Oid* types,
             steady::time_point deadline) {
  drive(exchange::prepare(conn, name, sql, param_count, types), deadline, nullptr);
}

result_ptr exec_prepared(PGconn* conn, const char* name, const param_list& params, steady::time_point deadline) {
  return drive(exchange::query_prepared(conn, name, params), deadline, nullptr);
}

result_ptr exec_params(PGconn* conn, const char* sql, const Oid* types, const param_list& params,
                       steady::time_point deadline, const canceller* cancel_on_timeout) {
  nonblocking_scope mode{conn};
  return drive(exchange::query_params(conn, sql, types, params), deadline, cancel_on_timeout);
}

result_ptr exec_simple(PGconn* conn, const char* sql, steady::time_point deadline) {
  return drive(exchange::query(conn, sql), deadline, nullptr);
}

bool idle_connection_alive(PGconn* conn) {
  if (PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE) return false;
  pollfd p{PQsocket(conn), POLLIN, 0};
  const int n = ::poll(&p, 1, 0);
  if (n <= 0) return n == 0;
  // An idle connection got input: usually the server telling us it is closing the session.
  if (PQconsumeInput(conn) == 0) return false;
  if (PQstatus(conn) != CONNECTION_OK) return false;
  // A FATAL message is followed by the end of the stream; look once more.
  p.revents = 0;
  if (::poll(&p, 1, 0) > 0 && (PQconsumeInput(conn) == 0 || PQstatus(conn) != CONNECTION_OK)) return false;
  return PQtransactionStatus(conn) == PQTRANS_IDLE;
}

// ---------------------------------------------------------------------------------------------
// result readers

bool is_null(const PGresult* r, int row, int column) noexcept {
  return PQgetisnull(r, row, column) != 0;
}

std::string get_bytes(const PGresult* r, int row, int column) {
  return std::string(PQgetvalue(r, row, column), static_cast<std::size_t>(PQgetlength(r, row, column)));
}

std::int64_t get_int8(const PGresult* r, int row, int column) {
  if (PQgetlength(r, row, column) != 8)
    throw pg_error(failure::server, "unexpected result: expected an 8-byte integer", "XX000");
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, column));
  std::uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u = (u << 8) | p[i];
  return static_cast<std::int64_t>(u);
}

bool get_bool(const PGresult* r, int row, int column) {
  if (PQgetlength(r, row, column) != 1)
    throw pg_error(failure::server, "unexpected result: expected a boolean", "XX000");
  return PQgetvalue(r, row, column)[0] != 0;
}

}  // namespace idem::detail::pg
