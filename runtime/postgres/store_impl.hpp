// runtime/postgres/store_impl.hpp — what postgres_store's files share: its state (impl), the
// statements' parameters and answers, and the two machines that the blocking and the asynchronous
// entry points both drive (claim_attempts for try_acquire, fenced_call for complete and release).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <idem/detail/waiter_count.hpp>
#include <idem/postgres_store.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "../core/pending_calls.hpp"
#include "../core/store_loop.hpp"
#include "cancel_worker.hpp"
#include "connection_pool.hpp"
#include "notification_listener.hpp"
#include "pg_connection.hpp"
#include "statements.hpp"

namespace idem::detail::pg {

using digest = std::array<unsigned char, 32>;
using std::chrono::milliseconds;

// The key of a record in notifications and in the listener's table: scope and digest. A scope
// never contains ':', so the form is unambiguous.
std::string record_key(const identity& id, const digest& d);

// A duration as the statements take it: milliseconds, cut to what a timestamp can hold.
std::int64_t to_ms(milliseconds d);

// Throws the store error for a failed statement: outcome_unknown_error when it was sent and not
// answered, else store_unavailable_error; both name `operation` and the masked `record`.
[[noreturn]] void throw_unavailable(std::string_view operation, const std::string& record, const pg_error& e,
                                    std::string_view note = {});

// What idem_claim answered.
struct claim_answer {
  enum class kind { acquired, duplicate, in_flight, mismatch, busy } what = kind::busy;
  milliseconds retry_after{0};
  bool took_over = false;  // acquired from a holder whose lease had lapsed
  std::string stored_fingerprint;
  payload value;
  std::chrono::system_clock::time_point completed_at;
};

// Which idem_records table a connection reaches (database_identity_sql).
struct database_identity {
  std::optional<std::int64_t> system_identifier;  // absent where pg_control_system() is not granted
  std::int64_t started_us = 0;                    // the postmaster's start
  std::int64_t database_oid = 0;
  std::string database;
  std::int64_t table_oid = 0;  // 0: no idem_records on the search_path
  bool standby = false;

  // The same server (cluster): by system identifier where both sides can read it, else by the
  // postmaster's start time (which a restart changes: see postgres_store::join_problem).
  bool same_cluster(const database_identity& o) const noexcept {
    if (system_identifier && o.system_identifier) return *system_identifier == *o.system_identifier;
    return started_us == o.started_us;
  }
  bool same_table(const database_identity& o) const noexcept {
    return same_cluster(o) && database_oid == o.database_oid && table_oid == o.table_oid;
  }
};

database_identity read_identity(PGconn* conn, steady::time_point deadline, const canceller* cancel_on_timeout);

// What an asynchronous statement reports: its result, or the pg_error it failed with.
using result_handler = std::function<void(result_ptr, std::exception_ptr)>;

class claim_attempts;
class fenced_call;

}  // namespace idem::detail::pg

namespace idem {

struct postgres_store::impl {
  explicit impl(postgres_store_options o);
  ~impl();
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  void log(log_level level, std::string message) const {
    if (options.log) options.log(log_record{level, std::move(message)});
  }

  // Runs statement `id` on `c`, preparing it first if this connection has not yet. A broken
  // connection or a timeout marks the checkout broken.
  detail::pg::result_ptr run(detail::pg::connection_pool::checkout& c, detail::pg::statement_id id,
                             const detail::pg::param_list& p, detail::pg::steady::time_point deadline);
  // Runs `sql` unprepared on `c`, like run().
  detail::pg::result_ptr run_sql(detail::pg::connection_pool::checkout& c, const char* sql, const Oid* types,
                                 const detail::pg::param_list& p, detail::pg::steady::time_point deadline);
  // run() without blocking: the statement is driven on the store's event loop, and `done` runs
  // once, after the checkout went back to the pool. Nothing of the caller's needs to stay.
  void async_run(std::shared_ptr<detail::pg::connection_pool::checkout> c, detail::pg::statement_id id,
                 detail::pg::param_list p, detail::pg::steady::time_point deadline, detail::pg::result_handler done);
  // What run() does when a statement fails: a timeout is cancelled on the server, a checkout that
  // broke is closed, and a statement sent but not answered is marked outcome-unknown.
  void failed(detail::pg::connection_pool::checkout& c, detail::pg::pg_error& e);
  // The server answered a statement: if unanswered statements wait for it, settle them now.
  void answered();

  // Runs one claim for `ctx` on a pooled connection; `backend` becomes the server process it was
  // sent to. Throws pg_error.
  detail::pg::result_ptr claim(const detail::pg::param_list& p, detail::pg::steady::time_point bound, int& backend);

  // Runs a complete or release to its end on this thread. Throws the store's errors.
  void fenced(detail::pg::fenced_call& call);

  // Unanswered claims and releases (unanswered.cpp).
  void remember_unanswered(std::string_view operation, const identity& ident, const detail::pg::digest& d,
                           const lease_token& token, std::vector<int> backends);

  // What the store's own connections reach; read once, or again when `refresh`.
  detail::pg::database_identity store_identity(bool refresh);

  // Asynchronous try_acquire calls not answered yet, answered store_unavailable_error when the
  // store goes (async_calls.cpp).
  struct async_claim;
  // Answers the pending asynchronous calls, stops the event loop (its registrations are answered
  // `stopped`) and waits for connections being opened for asynchronous callers.
  void stop_async();

  const unsigned long long instance;  // this store's number among the process's stores
  postgres_store_options options;
  detail::pg::connect_params params;
  std::atomic<std::uint64_t> round_trips{0};
  std::atomic<std::uint64_t> connections_opened{0};
  std::atomic<std::uint64_t> listener_connects{0};
  detail::waiter_count waiting;
  // What the store's own connections reach (database_identity_sql), read on first use.
  std::mutex identity_mutex;
  std::optional<detail::pg::database_identity> own_identity;
  detail::pg::cancel_worker cancels;
  // For statements on a caller's connection (exec_params with cancel_on_timeout).
  const detail::pg::canceller cancel_fn = [this](PGconn* conn) { return cancels.request(conn); };
  // What asynchronous statements and waits wait on; before the pool, whose connections it watches.
  detail::store_loop loop;
  detail::pg::connection_pool pool;
  detail::pg::notification_listener listener;

  detail::pending_calls<async_claim> pending;

  // Unanswered claims and releases (remember_unanswered) and the thread that settles them,
  // started on first use.
  struct unanswered_statement {
    std::uint64_t id = 0;
    std::string operation;  // "try_acquire" or "release"
    std::string scope;
    detail::pg::digest d{};
    lease_token token;
    std::vector<int> backends;  // server processes the statement was sent to
    std::string record;         // Scope/#xxxxxxxx, for log lines
    std::optional<detail::pg::steady::time_point> alive_since;  // the server answered while one of them ran
  };
  struct round_result {
    bool server_answered = false;
    bool progress = false;
    std::vector<std::pair<std::uint64_t, bool>> settled;                             // id, released a record
    std::vector<std::pair<std::uint64_t, detail::pg::steady::time_point>> waiting;  // id, first seen alive
  };
  void settle_loop();
  round_result settle_round(const std::vector<unanswered_statement>& batch);

  std::mutex unanswered_mutex;
  std::condition_variable unanswered_changed;
  std::deque<unanswered_statement> unanswered_list;
  std::uint64_t unanswered_ids = 0;
  bool settle_stop = false;
  bool settle_kicked = false;
  std::atomic<bool> settle_awaits_server{false};  // the last round got no answer
  std::atomic<std::uint64_t> unanswered_count{0};
  std::atomic<std::uint64_t> unanswered_released{0};
  std::atomic<std::uint64_t> unanswered_void{0};
  std::atomic<std::uint64_t> unanswered_dropped{0};
  std::atomic<std::uint64_t> unanswered_backend_alive{0};
  std::thread settler;
};

namespace detail::pg {

// claim_attempts
//
// One try_acquire's claims. The caller sends the claim request() describes, within bound(), to a
// server process, and hands back what came of it (answered, failed); the step says what next:
// the answer, another claim at once, or a wait on subscription() until a time. The blocking call
// waits on the subscription; the asynchronous one registers on it and on a timer. Every rule of
// the call (retrying a lost connection once, backing off lost races, settling claims that were
// sent and not answered) lives here once.
class claim_attempts {
 public:
  struct look_again {};
  struct wait_for {
    steady::time_point until;
  };
  using step = std::variant<acquire_result, look_again, wait_for>;

  claim_attempts(postgres_store::impl& s, const context& ctx, steady::time_point deadline);

  // The claim's parameters, bounded by the caller's remaining wait.
  [[nodiscard]] param_list request() const;
  // Until when a claim may take, waiting for a connection included.
  [[nodiscard]] steady::time_point bound() const;
  // The claim answered `r`. Throws corrupt_record_error for an answer it cannot read.
  [[nodiscard]] step answered(const PGresult* r);
  // The claim failed with `e` after it was sent to server process `backend` (0: not sent).
  // Throws the store error, unless the claim is to be sent again.
  [[nodiscard]] step failed(const pg_error& e, int backend);
  // The subscription to the record's notifications, once a step said wait_for.
  notification_listener::subscription& subscription() { return *subscription_; }
  // Drops a registration made on the subscription (notify_on_change), if any.
  void cancel_notify() {
    if (subscription_) subscription_->cancel_notify();
  }
  // The call ends without an answer from here (cancelled, or the store is going): claims sent and
  // not answered are settled as on any other way out.
  void abandon();

 private:
  step decide(claim_answer a);
  void settle_unless_acquired();

  postgres_store::impl& s_;
  const context& ctx_;
  const steady::time_point deadline_;
  const digest digest_;
  // One token for every look of this call: a look retried after a lost connection, which may
  // have acquired already, then answers "acquired" again instead of "in flight".
  const lease_token token_ = lease_token::generate();
  detail::waiter_count::scope counted_;
  std::unique_ptr<notification_listener::subscription> subscription_;
  bool retried_lost_connection_ = false;
  unsigned lost_races_ = 0;
  // Server processes a look of this call was sent to without an answer: that look may still run
  // there. Unless the call hands the token out (acquired), the store releases what it may leave.
  std::vector<int> unanswered_;
};

// fenced_call
//
// One complete or release: a statement fenced by the lease token, sent again after a lost
// deadlock or serialization race (it changed nothing), up to three times.
class fenced_call {
 public:
  // With `resend` (a release), a statement sent and not answered is remembered and sent again in
  // the background (remember_unanswered).
  fenced_call(postgres_store::impl& s, statement_id id, std::string_view operation, const identity& ident,
              param_list p, std::optional<std::pair<digest, lease_token>> resend = std::nullopt);

  statement_id statement() const noexcept { return id_; }
  const param_list& params() const noexcept { return params_; }
  steady::time_point deadline() const noexcept { return deadline_; }
  // No connection could be had: throws store_unavailable_error.
  [[noreturn]] void no_connection(const pg_error& e) const;
  // The statement sent to server process `backend` failed with `e` (its checkout is back in the
  // pool): true to send it again, else throws the store error.
  [[nodiscard]] bool failed(const pg_error& e, int backend);
  // The statement answered `r`: returns, or throws lease_lost_error or corrupt_record_error.
  void answered(const PGresult* r) const;

 private:
  postgres_store::impl& s_;
  const statement_id id_;
  const std::string_view operation_;
  const identity ident_;
  const param_list params_;
  const std::optional<std::pair<digest, lease_token>> resend_;
  const steady::time_point deadline_;
  int attempt_ = 1;
};

// complete's parameters.
param_list complete_params(const identity& id, const digest& d, const lease_token& token, const payload& value,
                           milliseconds ttl);
// release's parameters.
param_list release_params(const identity& id, const digest& d, const lease_token& token);

// Checks the answer of a fenced statement (complete, release): throws lease_lost_error when
// nothing was held under the token, corrupt_record_error for an answer it cannot read.
void check_fenced(const PGresult* r, std::string_view operation, const identity& ident);

}  // namespace detail::pg
}  // namespace idem
