// runtime/postgres/postgres_store.cpp — idem::postgres_store.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <deque>
#include <idem/deadline.hpp>
#include <idem/detail/waiter_count.hpp>
#include <idem/errors.hpp>
#include <idem/postgres_store.hpp>
#include <idem/postgres_transaction.hpp>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <idem/detail/attributes_codec.hpp>
#include "cancel_worker.hpp"
#include "connection_pool.hpp"
#include "notification_listener.hpp"
#include "pg_connection.hpp"
#include "statements.hpp"

namespace idem {
namespace {

using namespace detail::pg;
using std::chrono::milliseconds;
using digest = std::array<unsigned char, 32>;

constexpr std::size_t max_pool_size = 1000;
// The shortest lock_timeout a claim runs with, whatever the caller's remaining wait.
constexpr milliseconds min_lock_wait{100};
// pg_advisory_xact_lock key that serializes create_schema() across sessions ("idemschm").
constexpr long long schema_lock_key = 0x6964656d7363686dLL;
// Unanswered claims and releases remembered at once; beyond it the oldest is left to its lease.
constexpr std::size_t max_unanswered = 1024;
// How long the store waits, while the server answers, for the server process that received an
// unanswered statement to end before it gives up on settling it (a backend frozen on its own).
constexpr std::chrono::minutes max_backend_wait{10};
// Background retries of unanswered statements: the first soon after the failure, then doubling.
constexpr milliseconds settle_first_retry{20};
constexpr milliseconds settle_max_retry{1000};

// Which of the given server processes are still running. Param: pids as "1,2,3". Rows: pid.
constexpr const char* alive_backends_sql =
    "SELECT pid::int8 FROM pg_stat_activity WHERE pid = ANY (string_to_array($1, ',')::int4[])";

// The key of a record in notifications and in the listener's table: scope and digest. A scope
// never contains ':', so the form is unambiguous.
std::string record_key(const identity& id, const digest& d) {
  return id.scope() + ':' + to_hex(d.data(), d.size());
}

// A duration as the statements take it: milliseconds, cut to what a timestamp can hold.
std::int64_t to_ms(milliseconds d) {
  return stored_duration(d).count();
}

[[noreturn]] void throw_unavailable(std::string_view operation, const std::string& record, const pg_error& e,
                                    std::string_view note = {}) {
  std::string hint;
  if (e.kind() == failure::server && is_missing_schema(e.sqlstate()))
    hint = "; the idem schema is missing: call postgres_store::create_schema() or run schema.sql";
  const std::string subject = record.empty() ? std::string() : " " + record;
  if (e.outcome_unknown())
    throw outcome_unknown_error(fmt::format("postgres_store: cannot {}{}: {}{}; the statement was sent and not "
                                            "answered, whether it took effect is unknown",
                                            operation, subject, e.what(), hint),
                                std::string(operation), std::string(record));
  throw store_unavailable_error(
      fmt::format("postgres_store: cannot {}{}: {}{}{}", operation, subject, e.what(), hint, note),
      std::string(operation), std::string(record));
}

postgres_store_options validated(postgres_store_options o) {
  if (o.conninfo.empty())
    throw configuration_error(
        "postgres_store: conninfo is empty; give a libpq connection string such as \"host=localhost dbname=app\"");
  if (o.pool_size < 1 || o.pool_size > max_pool_size)
    throw configuration_error(
        fmt::format("postgres_store: pool_size must be between 1 and {}, got: {}", max_pool_size, o.pool_size));
  if (o.operation_timeout < milliseconds(1))
    throw configuration_error(
        fmt::format("postgres_store: operation_timeout must be at least 1ms, got: {}ms", o.operation_timeout.count()));
  if (o.fallback_recheck < milliseconds(1))
    throw configuration_error(
        fmt::format("postgres_store: fallback_recheck must be at least 1ms, got: {}ms", o.fallback_recheck.count()));
  if (o.purge_batch < 1) throw configuration_error("postgres_store: purge_batch must be at least 1, got: 0");
  return o;
}

connect_params pool_params(const postgres_store_options& o) {
  connect_params p = connect_params::parse(o.conninfo);
  p.set_default("fallback_application_name", o.application_name);
  // A server-side bound too, so that a statement we stopped waiting for stops on the server.
  p.append_server_option(fmt::format("-c statement_timeout={}", o.operation_timeout.count()));
  return p;
}

connect_params listener_params(const postgres_store_options& o) {
  connect_params p = connect_params::parse(o.conninfo);
  p.set_default("fallback_application_name", o.application_name + "-listener");
  // The LISTEN connection is idle for long stretches: have TCP notice a peer that vanished.
  p.set_default("keepalives", "1");
  p.set_default("keepalives_idle", "10");
  p.set_default("keepalives_interval", "5");
  p.set_default("keepalives_count", "3");
  return p;
}

// What idem_claim answered.
struct claim_answer {
  enum class kind { acquired, duplicate, in_flight, mismatch, busy } what = kind::busy;
  milliseconds retry_after{0};
  std::string stored_fingerprint;
  payload value;
  std::chrono::system_clock::time_point completed_at;
};

// Why a fenced statement (complete, release) changed nothing, from its diagnosis columns.
std::string lease_lost_reason(const PGresult* r) {
  if (is_null(r, 0, 1)) return "the record is absent (released, purged or never acquired)";
  const std::string status = get_bytes(r, 0, 1);
  if (status == "complete") {
    if (!is_null(r, 0, 3) && !get_bool(r, 0, 3)) return "the record is absent (its replay window has passed)";
    return "the record is already complete";
  }
  return "the record is held under another lease (this lease expired and another caller took it over)";
}

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

database_identity read_identity(PGconn* conn, steady::time_point deadline, const canceller* cancel_on_timeout) {
  const param_list none;
  const result_ptr r = exec_params(conn, database_identity_sql, nullptr, none, deadline, cancel_on_timeout);
  if (PQntuples(r.get()) != 1 || PQnfields(r.get()) != 6)
    throw corrupt_record_error("postgres_store: unexpected answer to the question which database a connection is on");
  database_identity id;
  if (!is_null(r.get(), 0, 0)) id.system_identifier = get_int8(r.get(), 0, 0);
  id.started_us = get_int8(r.get(), 0, 1);
  id.database_oid = get_int8(r.get(), 0, 2);
  id.database = get_bytes(r.get(), 0, 3);
  id.table_oid = get_int8(r.get(), 0, 4);
  id.standby = get_bool(r.get(), 0, 5);
  return id;
}

// Numbers the stores of the process, so that a transaction remembers which store checked it
// (postgres_transaction::joined_store_) without keeping a pointer that a later store could reuse.
std::atomic<unsigned long long> next_store_instance{0};

}  // namespace

struct postgres_store::impl {
  explicit impl(postgres_store_options o)
      : instance(next_store_instance.fetch_add(1, std::memory_order_relaxed) + 1),
        options(validated(std::move(o))),
        params(pool_params(options)),
        cancels(options.operation_timeout),
        pool(params, options.pool_size, &connections_opened),
        listener(listener_params(options), notify_channel, options.operation_timeout, options.log, &listener_connects) {
  }

  ~impl() {
    {
      std::lock_guard lock(unanswered_mutex);
      settle_stop = true;
    }
    unanswered_changed.notify_all();
    if (settler.joinable()) settler.join();  // at most one statement, bounded by operation_timeout
  }
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  void log(log_level level, std::string message) const {
    if (options.log) options.log(log_record{level, std::move(message)});
  }

  // Runs statement `id` on `c`, preparing it first if this connection has not yet. A broken
  // connection or a timeout marks the checkout broken.
  result_ptr run(connection_pool::checkout& c, statement_id id, const param_list& p, steady::time_point deadline) {
    const statement& s = statement_for(id);
    const std::uint32_t bit = 1u << static_cast<unsigned>(id);
    try {
      if ((c.connection().prepared & bit) == 0) {
        round_trips.fetch_add(1, std::memory_order_relaxed);
        prepare(c.get(), s.name, s.sql, s.param_count, s.types.data(), deadline);
        c.connection().prepared |= bit;
      }
      round_trips.fetch_add(1, std::memory_order_relaxed);
      result_ptr r = exec_prepared(c.get(), s.name, p, deadline);
      answered();
      return r;
    } catch (pg_error& e) {
      failed(c, e);
      throw;
    }
  }

  // Runs `sql` unprepared on `c`, like run().
  result_ptr run_sql(connection_pool::checkout& c, const char* sql, const Oid* types, const param_list& p,
                     steady::time_point deadline) {
    try {
      round_trips.fetch_add(1, std::memory_order_relaxed);
      result_ptr r = exec_params(c.get(), sql, types, p, deadline);
      answered();
      return r;
    } catch (pg_error& e) {
      failed(c, e);
      throw;
    }
  }

  void failed(connection_pool::checkout& c, pg_error& e) {
    if (e.kind() == failure::timeout) {
      // We stop waiting; have the server stop too. A statement it has not started yet (a frozen
      // server) is not stopped by this: the backend ignores a cancel while it reads a command,
      // and runs the command once read. Unanswered claims are settled by settle_round().
      (void)cancels.request(c.get());
    }
    if (e.kind() != failure::server) c.mark_broken();
    // Something was sent (the PREPARE or the statement) and no answer came.
    if (e.kind() == failure::timeout || e.kind() == failure::connection_lost) e.set_outcome_unknown();
  }

  // The server answered a statement: if unanswered statements wait for it, settle them now.
  void answered() {
    if (!settle_awaits_server.load(std::memory_order_relaxed)) return;
    {
      std::lock_guard lock(unanswered_mutex);
      settle_awaits_server.store(false, std::memory_order_relaxed);
      settle_kicked = true;
    }
    unanswered_changed.notify_all();
  }

  // ---------------------------------------------------------------------------------------------
  // Unanswered claims and releases
  //
  // A statement sent to a server that stops answering (frozen, stalled, cut off) may run when the
  // server wakes, after the client gave up and closed the connection: a claim then leaves the
  // record in progress under a token nobody holds. The store knows the token; it remembers the
  // record and releases it (the ordinary fenced release: only while in progress under exactly that
  // token) once the server answers again and the server process that received the statement has
  // ended (before that, the statement may still run: a release sent earlier would find nothing and
  // the claim would then hold the key). A release that was not answered is sent again the same way.

  struct unanswered_statement {
    std::uint64_t id = 0;
    std::string operation;  // "try_acquire" or "release"
    std::string scope;
    digest d{};
    lease_token token;
    std::vector<int> backends;  // server processes the statement was sent to
    std::string record;         // Scope/#xxxxxxxx, for log lines
    std::optional<steady::time_point> alive_since;  // the server answered while one of them ran
  };

  void remember_unanswered(std::string_view operation, const identity& ident, const digest& d, const lease_token& token,
                           std::vector<int> backends) {
    unanswered_statement u;
    u.operation = std::string(operation);
    u.scope = ident.scope();
    u.d = d;
    u.token = token;
    u.backends = std::move(backends);
    u.record = ident.to_string();
    std::optional<std::string> dropped;
    {
      std::lock_guard lock(unanswered_mutex);
      if (settle_stop) return;
      if (!settler.joinable()) {
        try {
          settler = std::thread([this] { settle_loop(); });
        } catch (...) {
          return;  // no thread: the record is left to its lease, as before
        }
      }
      u.id = ++unanswered_ids;
      if (unanswered_list.size() >= max_unanswered) {
        dropped = unanswered_list.front().record;
        unanswered_list.pop_front();
        unanswered_dropped.fetch_add(1, std::memory_order_relaxed);
      }
      unanswered_list.push_back(std::move(u));
      unanswered_count.fetch_add(1, std::memory_order_relaxed);
      settle_kicked = true;
    }
    unanswered_changed.notify_all();
    if (dropped)
      log(log_level::warning,
          fmt::format("postgres_store: more than {} unanswered statements to settle; {} is left to its lease",
                      max_unanswered, *dropped));
  }

  void settle_loop() {
    std::unique_lock lock(unanswered_mutex);
    milliseconds pause = settle_first_retry;
    for (;;) {
      unanswered_changed.wait(lock, [&] { return settle_stop || !unanswered_list.empty(); });
      if (settle_stop) return;
      // A new entry or a statement the server answered elsewhere starts a round at once (after
      // the first short pause); otherwise wait out the backoff.
      unanswered_changed.wait_for(lock, pause, [&] { return settle_stop || settle_kicked; });
      if (settle_stop) return;
      const bool kicked = settle_kicked;
      settle_kicked = false;
      std::vector<unanswered_statement> batch(unanswered_list.begin(), unanswered_list.end());
      lock.unlock();
      const round_result r = settle_round(batch);
      lock.lock();
      for (const auto& [id, outcome] : r.settled) {
        for (auto it = unanswered_list.begin(); it != unanswered_list.end(); ++it) {
          if (it->id != id) continue;
          unanswered_list.erase(it);
          break;
        }
      }
      for (const auto& [id, since] : r.waiting) {
        for (auto& u : unanswered_list)
          if (u.id == id && !u.alive_since) u.alive_since = since;
      }
      if (r.server_answered) {
        // Waiting for a backend to end: look again soon, less often the longer it takes.
        pause = kicked || r.progress ? settle_first_retry : std::min(pause * 2, settle_max_retry);
      } else {
        pause = std::min(std::max(pause, settle_first_retry) * 2, settle_max_retry);
        settle_awaits_server.store(true, std::memory_order_relaxed);
      }
    }
  }

  struct round_result {
    bool server_answered = false;
    bool progress = false;
    std::vector<std::pair<std::uint64_t, bool>> settled;                 // id, released a record
    std::vector<std::pair<std::uint64_t, steady::time_point>> waiting;  // id, first seen alive
  };

  // One attempt at everything remembered: which receiving server processes still run (one
  // statement), then a fenced release of each record whose processes have all ended.
  round_result settle_round(const std::vector<unanswered_statement>& batch) {
    round_result result;
    const auto deadline = deadline_after(options.operation_timeout);
    std::string pids;
    for (const auto& u : batch)
      for (const int pid : u.backends) pids += (pids.empty() ? "" : ",") + std::to_string(pid);
    try {
      auto c = pool.acquire(deadline);
      std::vector<int> alive;
      if (!pids.empty()) {
        param_list p;
        p.text(pids);
        const std::array<Oid, 1> types{oid_text};
        const result_ptr r = run_sql(c, alive_backends_sql, types.data(), p, deadline);
        for (int row = 0; row < PQntuples(r.get()); ++row) alive.push_back(static_cast<int>(get_int8(r.get(), row, 0)));
      }
      result.server_answered = true;
      const auto now = steady::now();
      for (const auto& u : batch) {
        const bool running = std::any_of(u.backends.begin(), u.backends.end(), [&](int pid) {
          return std::find(alive.begin(), alive.end(), pid) != alive.end();
        });
        if (running) {
          unanswered_backend_alive.fetch_add(1, std::memory_order_relaxed);
          if (u.alive_since && now - *u.alive_since > max_backend_wait) {
            unanswered_dropped.fetch_add(1, std::memory_order_relaxed);
            result.settled.emplace_back(u.id, false);
            log(log_level::warning,
                fmt::format("postgres_store: the server process that received an unanswered {} of {} still runs "
                            "after {} min; the record is left to its lease",
                            u.operation, u.record, max_backend_wait.count()));
          } else {
            result.waiting.emplace_back(u.id, now);
          }
          continue;
        }
        param_list p;
        p.text(u.scope).bytes(u.d.data(), u.d.size()).uuid(u.token).text(u.scope + ':' + to_hex(u.d.data(), u.d.size()));
        const result_ptr r = run(c, statement_id::release, p, deadline);
        const bool released = PQntuples(r.get()) == 1 && PQnfields(r.get()) == 4 && get_int8(r.get(), 0, 0) == 1;
        result.settled.emplace_back(u.id, released);
        result.progress = true;
        if (released) {
          unanswered_released.fetch_add(1, std::memory_order_relaxed);
          log(log_level::info, fmt::format("postgres_store: released {}, left in progress by an unanswered {} that "
                                           "the server ran after the client gave up",
                                           u.record, u.operation));
        } else {
          unanswered_void.fetch_add(1, std::memory_order_relaxed);
        }
      }
    } catch (const pg_error&) {
      // Not answering yet (or refusing): the next round tries again. What was settled stays so.
    } catch (const std::exception&) {
      // A malformed answer: try again later rather than end the thread.
    }
    return result;
  }

  // `backend` becomes the server process the claim is sent to.
  claim_answer claim(const context& ctx, const digest& d, const lease_token& token, steady::time_point deadline,
                     int& backend) {
    const auto now = steady::now();
    const auto remaining = std::chrono::ceil<milliseconds>(std::max(deadline - now, steady::duration::zero()));
    const auto bound = saturating_add(std::max(deadline, now), options.operation_timeout);
    auto c = pool.acquire(bound);
    backend = PQbackendPID(c.get());
    param_list p;
    p.text(ctx.id.scope()).bytes(d.data(), d.size()).uuid(token).int8(to_ms(ctx.lease)).int8(to_ms(ctx.ttl));
    if (ctx.fingerprint) {
      p.text(*ctx.fingerprint);
    } else {
      p.null();
    }
    // A row lock on a record being taken over is waited for as long as the caller waits, but at
    // least a little, so a lock held for an instant (another claim) is not mistaken for a holder.
    // lock_timeout is an int of milliseconds on the server.
    p.int8(std::clamp<std::int64_t>(
        remaining.count(), std::min<std::int64_t>(options.operation_timeout.count(), min_lock_wait.count()), INT_MAX));

    result_ptr r;
    try {
      r = run(c, statement_id::claim, p, bound);
    } catch (const pg_error& e) {
      // Another session got there first (or held a lock past our wait): look again.
      if (e.kind() == failure::server && is_lost_race(e.sqlstate())) return {};
      throw;
    }
    if (PQntuples(r.get()) != 1 || PQnfields(r.get()) != 7)
      throw corrupt_record_error(
          fmt::format("postgres_store: idem_claim answered {} rows of {} columns for {}; "
                      "is the schema from another version?",
                      PQntuples(r.get()), PQnfields(r.get()), ctx.id.to_string()),
          "try_acquire", ctx.id.to_string());
    claim_answer a;
    const std::string outcome = get_bytes(r.get(), 0, 0);
    if (outcome == "acquired") {
      a.what = claim_answer::kind::acquired;
    } else if (outcome == "duplicate") {
      a.what = claim_answer::kind::duplicate;
      a.value.type = get_bytes(r.get(), 0, 3);
      a.value.body = get_bytes(r.get(), 0, 4);
      if (!is_null(r.get(), 0, 5)) {
        std::optional<detail::attribute_map> attributes = detail::decode_attributes(get_bytes(r.get(), 0, 5));
        if (!attributes)
          throw corrupt_record_error(
              fmt::format("postgres_store: the payload attributes of {} are malformed", ctx.id.to_string()),
              "try_acquire", ctx.id.to_string());
        a.value.attributes = std::move(*attributes);
      }
      a.completed_at =
          std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::microseconds(get_int8(r.get(), 0, 6))));
    } else if (outcome == "in_flight") {
      a.what = claim_answer::kind::in_flight;
      a.retry_after = milliseconds(std::max<std::int64_t>(get_int8(r.get(), 0, 1), 0));
    } else if (outcome == "mismatch") {
      a.what = claim_answer::kind::mismatch;
      a.stored_fingerprint = get_bytes(r.get(), 0, 2);
    } else if (outcome == "busy") {
      a.what = claim_answer::kind::busy;
    } else {
      throw corrupt_record_error(
          fmt::format("postgres_store: idem_claim answered an unknown outcome for {}", ctx.id.to_string()),
          "try_acquire", ctx.id.to_string());
    }
    return a;
  }

  // Runs complete or release: one statement fenced by the token. Retries a statement that lost a
  // deadlock or serialization race (it changed nothing). Throws lease_lost_error if nothing
  // was held under the token.
  // With `resend` (digest and token of a release), an unanswered statement is remembered and
  // sent again in the background (remember_unanswered).
  void fenced(statement_id id, std::string_view operation, const identity& ident, const param_list& p,
              const std::pair<const digest*, const lease_token*>& resend = {}) {
    const auto deadline = deadline_after(options.operation_timeout);
    for (int attempt = 1;; ++attempt) {
      std::optional<connection_pool::checkout> c;
      try {
        c.emplace(pool.acquire(deadline));
      } catch (const pg_error& e) {
        throw_unavailable(operation, ident.to_string(), e);  // nothing was sent
      }
      const int backend = PQbackendPID(c->get());
      result_ptr r;
      try {
        r = run(*c, id, p, deadline);
      } catch (const pg_error& e) {
        if (e.kind() == failure::server && is_lost_race(e.sqlstate()) && attempt < 3) continue;
        c.reset();  // back to the pool (closed: it broke) before anything else is sent
        if (e.outcome_unknown() && resend.first != nullptr)
          remember_unanswered(operation, ident, *resend.first, *resend.second, {backend});
        throw_unavailable(operation, ident.to_string(), e);
      }
      check_fenced(r.get(), operation, ident);
      return;
    }
  }

  static void check_fenced(const PGresult* r, std::string_view operation, const identity& ident) {
    if (PQntuples(r) != 1 || PQnfields(r) != 4)
      throw corrupt_record_error(
          fmt::format("postgres_store: unexpected answer to {} {}", operation, ident.to_string()),
          std::string(operation), ident.to_string());
    if (get_int8(r, 0, 0) == 1) return;
    const std::string record = ident.to_string();
    throw lease_lost_error(
        fmt::format("postgres_store: cannot {} {}: lease lost: {}", operation, record, lease_lost_reason(r)),
        std::string(operation), record);
  }

  // What the store's own connections reach; read once, or again when `refresh` (the caller's
  // transaction looked different: the database may have been restarted or moved since).
  database_identity store_identity(bool refresh) {
    std::lock_guard lock(identity_mutex);
    if (own_identity && !refresh) return *own_identity;
    const auto deadline = deadline_after(options.operation_timeout);
    try {
      auto c = pool.acquire(deadline);
      try {
        round_trips.fetch_add(1, std::memory_order_relaxed);
        own_identity = read_identity(c.get(), deadline, nullptr);
      } catch (const pg_error& e) {
        if (e.kind() != failure::server) c.mark_broken();
        throw;
      }
    } catch (const pg_error& e) {
      throw_unavailable("tell which database it writes to", {}, e);
    }
    return *own_identity;
  }

  static param_list complete_params(const identity& id, const digest& d, const lease_token& token, const payload& value,
                                    milliseconds ttl) {
    param_list p;
    p.text(id.scope())
        .bytes(d.data(), d.size())
        .uuid(token)
        .text(value.type)
        .bytes(value.body)
        .bytes(detail::encode_attributes(value.attributes))
        .int8(to_ms(ttl))
        .text(record_key(id, d));
    return p;
  }

  const unsigned long long instance;  // this store's number among the process's stores
  postgres_store_options options;
  connect_params params;
  std::atomic<std::uint64_t> round_trips{0};
  std::atomic<std::uint64_t> connections_opened{0};
  std::atomic<std::uint64_t> listener_connects{0};
  detail::waiter_count waiting;
  // What the store's own connections reach (database_identity_sql), read on first use.
  std::mutex identity_mutex;
  std::optional<database_identity> own_identity;
  cancel_worker cancels;
  // For statements on a caller's connection (exec_params with cancel_on_timeout).
  const canceller cancel_fn = [this](PGconn* conn) { return cancels.request(conn); };
  connection_pool pool;
  notification_listener listener;

  // Unanswered claims and releases (remember_unanswered) and the thread that settles them,
  // started on first use.
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

postgres_store::postgres_store(postgres_store_options options) : impl_(std::make_unique<impl>(std::move(options))) {}

postgres_store::~postgres_store() = default;

acquire_result postgres_store::try_acquire(const context& ctx) {
  const auto deadline = deadline_after(ctx.wait);
  const digest d = ctx.id.key_digest();
  detail::waiter_count::scope counted(impl_->waiting);
  // One token for every look of this call: a look retried after a lost connection, which may
  // have acquired already, then answers "acquired" again instead of "in flight".
  const lease_token token = lease_token::generate();
  std::unique_ptr<notification_listener::subscription> subscription;
  bool retried_lost_connection = false;
  unsigned lost_races = 0;
  // Server processes a look of this call was sent to without an answer: that look may still run
  // there. Unless the call hands the token out (acquired), the store releases what it may leave.
  std::vector<int> unanswered;
  auto settle_unless_acquired = [&] {
    if (!unanswered.empty()) impl_->remember_unanswered("try_acquire", ctx.id, d, token, std::move(unanswered));
  };

  for (;;) {
    claim_answer a;
    int backend = 0;
    try {
      a = impl_->claim(ctx, d, token, deadline, backend);
    } catch (const pg_error& e) {
      if (e.outcome_unknown()) unanswered.push_back(backend);
      if (e.kind() == failure::connection_lost && !retried_lost_connection) {
        retried_lost_connection = true;
        continue;
      }
      if (!unanswered.empty() && !e.outcome_unknown()) {
        // An earlier look was sent and not answered: that this one sent nothing says nothing.
        pg_error unknown = e;
        unknown.set_outcome_unknown();
        settle_unless_acquired();
        throw_unavailable("try_acquire", ctx.id.to_string(), unknown);
      }
      settle_unless_acquired();
      throw_unavailable("try_acquire", ctx.id.to_string(), e);
    }
    switch (a.what) {
      case claim_answer::kind::acquired:
        return acquired{token};
      case claim_answer::kind::duplicate:
        settle_unless_acquired();
        return duplicate{std::move(a.value), a.completed_at};
      case claim_answer::kind::mismatch:
        settle_unless_acquired();
        return fingerprint_mismatch{std::move(a.stored_fingerprint), ctx.fingerprint.value_or(std::string())};
      case claim_answer::kind::in_flight:
      case claim_answer::kind::busy:
        break;
    }
    const auto now = steady::now();
    if (now >= deadline) {
      settle_unless_acquired();
      return in_flight{a.retry_after};
    }
    if (!subscription) {
      // Subscribe, then look again: a completion between our look and the subscription would
      // otherwise never wake us.
      subscription = impl_->listener.subscribe(record_key(ctx.id, d));
      continue;
    }
    steady::time_point until;
    if (a.what == claim_answer::kind::busy) {
      // The record changed under us: look again at once, then back off a little (up to 32 ms)
      // if races keep being lost, so a storm of them does not become a storm of statements.
      const auto pause = std::chrono::microseconds(lost_races == 0 ? 0 : (500 << std::min(lost_races, 6u)));
      ++lost_races;
      until = std::min(deadline, saturating_add(now, pause));
    } else {
      // Wake up when the record is notified, when the holder's lease runs out (to take it over),
      // or at our deadline; while the listener is down, re-check periodically.
      lost_races = 0;
      until = std::min(deadline, saturating_add(now, a.retry_after + milliseconds(1)));
      if (!impl_->listener.healthy()) until = std::min(until, saturating_add(now, impl_->options.fallback_recheck));
    }
    // Subscribed before the look that found the record held: a notification from then on wakes us.
    counted.begin();
    if (until > now) subscription->wait_until(until);
  }
}

void postgres_store::complete(const identity& id, const lease_token& token, const payload& value, milliseconds ttl) {
  const digest d = id.key_digest();
  impl_->fenced(statement_id::complete, "complete", id, impl::complete_params(id, d, token, value, ttl));
}

void postgres_store::release(const identity& id, const lease_token& token) {
  const digest d = id.key_digest();
  param_list p;
  p.text(id.scope()).bytes(d.data(), d.size()).uuid(token).text(record_key(id, d));
  impl_->fenced(statement_id::release, "release", id, p, {&d, &token});
}

bool postgres_store::extend(const identity& id, const lease_token& token, milliseconds lease) {
  const digest d = id.key_digest();
  param_list p;
  p.text(id.scope()).bytes(d.data(), d.size()).uuid(token).int8(to_ms(lease));
  const auto deadline = deadline_after(impl_->options.operation_timeout);
  try {
    auto c = impl_->pool.acquire(deadline);
    const result_ptr r = impl_->run(c, statement_id::extend, p, deadline);
    return std::string_view(PQcmdTuples(r.get())) == "1";
  } catch (const pg_error& e) {
    if (e.kind() == failure::server && is_lost_race(e.sqlstate())) return false;  // someone else holds it
    throw_unavailable("extend", id.to_string(), e);
  }
}

std::size_t postgres_store::purge_expired() {
  std::size_t total = 0;
  param_list p;
  p.int8(static_cast<std::int64_t>(impl_->options.purge_batch));
  for (;;) {
    const auto deadline = deadline_after(impl_->options.operation_timeout);
    std::int64_t deleted = 0;
    try {
      auto c = impl_->pool.acquire(deadline);
      result_ptr r = impl_->run(c, statement_id::purge, p, deadline);
      deleted = get_int8(r.get(), 0, 0);
    } catch (const pg_error& e) {
      if (e.kind() == failure::server && is_lost_race(e.sqlstate())) continue;
      throw_unavailable("purge_expired", {}, e);
    }
    total += static_cast<std::size_t>(deleted);
    if (static_cast<std::size_t>(deleted) < impl_->options.purge_batch) return total;
  }
}

void postgres_store::complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                                             milliseconds ttl, transaction& tx) {
  if (std::string problem = join_problem(tx); !problem.empty())
    throw configuration_error(
        fmt::format("postgres_store cannot complete {} inside this transaction: {}", id.to_string(), problem));
  auto* pg_tx = static_cast<postgres_transaction*>(&tx);

  const digest d = id.key_digest();
  const param_list p = impl::complete_params(id, d, token, value, ttl);
  const statement& s = statement_for(statement_id::complete);
  result_ptr r;
  try {
    impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
    r = exec_params(pg_tx->connection(), s.sql, s.types.data(), p, deadline_after(impl_->options.operation_timeout),
                    &impl_->cancel_fn);
  } catch (const pg_error& e) {
    throw_unavailable("complete_in_transaction", id.to_string(), e,
                      "; the caller's transaction cannot commit and must roll back");
  }
  impl::check_fenced(r.get(), "complete_in_transaction", id);
}

std::string postgres_store::join_problem(const transaction& tx) const {
  const auto* pg_tx = dynamic_cast<const postgres_transaction*>(&tx);
  if (pg_tx == nullptr)
    return "join-transaction completion needs an idem::postgres_transaction over the connection your business "
           "writes use; this transaction is of another type";
  if (!pg_tx->active()) return "the postgres_transaction already ended";
  PGconn* conn = pg_tx->connection();
  if (PQstatus(conn) != CONNECTION_OK) return "the postgres_transaction's connection is broken";
  if (PQtransactionStatus(conn) == PQTRANS_INERROR)
    return "the postgres_transaction has failed (a statement in it raised an error) and can only roll back";
  if (pg_tx->joined_store_ == impl_->instance) return {};  // checked already in this transaction

  database_identity theirs;
  try {
    impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
    theirs = read_identity(conn, deadline_after(impl_->options.operation_timeout), &impl_->cancel_fn);
  } catch (const pg_error& e) {
    throw_unavailable("tell which database the caller's transaction is on", {}, e,
                      "; the caller's transaction cannot commit and must roll back");
  }
  if (theirs.standby)
    return fmt::format("the postgres_transaction's connection is on a read-only standby (database \"{}\")",
                       theirs.database);
  if (theirs.table_oid == 0)
    return fmt::format("the postgres_transaction's connection (database \"{}\") finds no idem_records table on its "
                       "search_path",
                       theirs.database);
  database_identity ours = impl_->store_identity(false);
  if (!theirs.same_table(ours)) ours = impl_->store_identity(true);  // restarted or moved since?
  if (!theirs.same_cluster(ours))
    return fmt::format("the postgres_transaction's connection is on another PostgreSQL server (database \"{}\") than "
                       "the store's (database \"{}\")",
                       theirs.database, ours.database);
  if (theirs.database_oid != ours.database_oid)
    return fmt::format("the postgres_transaction's connection is on database \"{}\", the store's records are in "
                       "database \"{}\"",
                       theirs.database, ours.database);
  if (theirs.table_oid != ours.table_oid)
    return fmt::format("the postgres_transaction's connection reaches another idem_records table than the store's "
                       "(in database \"{}\": its search_path names another schema)",
                       theirs.database);
  pg_tx->joined_store_ = impl_->instance;
  return {};
}

bool postgres_store::extend_in_transaction(const identity& id, const lease_token& token, milliseconds lease,
                                           transaction& tx) {
  if (!join_problem(tx).empty()) return extend(id, token, lease);
  auto* pg_tx = static_cast<postgres_transaction*>(&tx);
  const digest d = id.key_digest();
  param_list p;
  p.text(id.scope()).bytes(d.data(), d.size()).uuid(token).int8(to_ms(lease));
  const std::array<Oid, 4> types{oid_text, oid_bytea, oid_uuid, oid_int8};
  result_ptr r;
  try {
    impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
    r = exec_params(pg_tx->connection(), extend_in_transaction_sql, types.data(), p,
                    deadline_after(impl_->options.operation_timeout), &impl_->cancel_fn);
  } catch (const pg_error& e) {
    throw_unavailable("extend_in_transaction", id.to_string(), e,
                      "; the caller's transaction cannot commit and must roll back");
  }
  return std::string_view(PQcmdTuples(r.get())) == "1";
}

std::size_t postgres_store::waiting() const noexcept {
  return impl_->waiting.get();
}

void postgres_store::create_schema() {
  const std::string script =
      fmt::format("BEGIN;\nSELECT pg_advisory_xact_lock({});\n{}\nCOMMIT;", schema_lock_key, schema_text);
  const auto deadline = deadline_after(impl_->options.operation_timeout);
  try {
    auto c = impl_->pool.acquire(deadline);
    try {
      impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
      exec_simple(c.get(), script.c_str(), deadline);
    } catch (const pg_error&) {
      c.mark_broken();  // possibly inside the failed transaction
      throw;
    }
  } catch (const pg_error& e) {
    throw_unavailable("create_schema", {}, e);
  }
}

std::string_view postgres_store::schema_sql() noexcept {
  return schema_text;
}

postgres_store_statistics postgres_store::statistics() const noexcept {
  postgres_store_statistics s;
  s.round_trips = impl_->round_trips.load(std::memory_order_relaxed);
  s.connections_opened = impl_->connections_opened.load(std::memory_order_relaxed);
  s.listener_connects = impl_->listener_connects.load(std::memory_order_relaxed);
  s.cancels_requested = impl_->cancels.requested();
  s.cancels_delivered = impl_->cancels.delivered();
  s.unanswered = impl_->unanswered_count.load(std::memory_order_relaxed);
  s.unanswered_released = impl_->unanswered_released.load(std::memory_order_relaxed);
  s.unanswered_void = impl_->unanswered_void.load(std::memory_order_relaxed);
  s.unanswered_dropped = impl_->unanswered_dropped.load(std::memory_order_relaxed);
  s.unanswered_backend_alive = impl_->unanswered_backend_alive.load(std::memory_order_relaxed);
  return s;
}

int postgres_store::listener_backend_pid() const noexcept {
  return impl_->listener.backend_pid();
}

}  // namespace idem
