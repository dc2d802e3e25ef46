// runtime/postgres/postgres_store.cpp — idem::postgres_store: construction, statements on pooled
// connections, and the operations that are one fenced statement each. try_acquire is in
// claims.cpp, the asynchronous calls in async_calls.cpp, the caller's transactions in
// joined_transaction.cpp, unanswered statements in unanswered.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <idem/deadline.hpp>
#include <idem/errors.hpp>
#include <string>
#include <utility>

#include <idem/detail/attributes_codec.hpp>
#include "store_impl.hpp"

namespace idem {
namespace detail::pg {

std::string record_key(const identity& id, const digest& d) {
  std::string key;
  key.reserve(id.scope().size() + 1 + 2 * d.size());
  key.append(id.scope()).append(1, ':');
  append_hex(key, d.data(), d.size());
  return key;
}

std::int64_t to_ms(milliseconds d) {
  return stored_duration(d).count();
}

void throw_unavailable(std::string_view operation, const std::string& record, const pg_error& e,
                       std::string_view note) {
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


namespace {

constexpr std::size_t max_pool_size = 1000;
// pg_advisory_xact_lock key that serializes create_schema() across sessions ("idemschm").
constexpr long long schema_lock_key = 0x6964656d7363686dLL;

// Numbers the stores of the process, so that a transaction remembers which store checked it
// (postgres_transaction::joined_store_) without keeping a pointer that a later store could reuse.
std::atomic<unsigned long long> next_store_instance{0};

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

}  // namespace

fenced_call::fenced_call(postgres_store::impl& s, statement_id id, std::string_view operation, const identity& ident,
                         param_list p, std::optional<std::pair<digest, lease_token>> resend)
    : s_(s),
      id_(id),
      operation_(operation),
      ident_(ident),
      params_(std::move(p)),
      resend_(std::move(resend)),
      deadline_(deadline_after(s.options.operation_timeout)) {}

void fenced_call::no_connection(const pg_error& e) const {
  throw_unavailable(operation_, ident_.to_string(), e);  // nothing was sent
}

bool fenced_call::failed(const pg_error& e, int backend) {
  if (e.kind() == failure::server && is_lost_race(e.sqlstate()) && attempt_ < 3) {
    ++attempt_;
    return true;
  }
  if (e.outcome_unknown() && resend_)
    s_.remember_unanswered(operation_, ident_, resend_->first, resend_->second, {backend});
  throw_unavailable(operation_, ident_.to_string(), e);
}

void fenced_call::answered(const PGresult* r) const { check_fenced(r, operation_, ident_); }

void check_fenced(const PGresult* r, std::string_view operation, const identity& ident) {
  if (PQntuples(r) != 1 || PQnfields(r) != 4)
    throw corrupt_record_error(fmt::format("postgres_store: unexpected answer to {} {}", operation, ident.to_string()),
                               std::string(operation), ident.to_string());
  if (get_int8(r, 0, 0) == 1) return;
  const std::string record = ident.to_string();
  throw lease_lost_error(
      fmt::format("postgres_store: cannot {} {}: lease lost: {}", operation, record, lease_lost_reason(r)),
      std::string(operation), record);
}

param_list complete_params(const identity& id, const digest& d, const lease_token& token, const payload& value,
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

param_list release_params(const identity& id, const digest& d, const lease_token& token) {
  param_list p;
  p.text(id.scope()).bytes(d.data(), d.size()).uuid(token).text(record_key(id, d));
  return p;
}

}  // namespace detail::pg

using namespace detail::pg;

postgres_store::impl::impl(postgres_store_options o)
    : instance(next_store_instance.fetch_add(1, std::memory_order_relaxed) + 1),
      options(validated(std::move(o))),
      params(pool_params(options)),
      cancels(options.operation_timeout),
      loop(options.event_loop),
      pool(params, options.pool_size, &connections_opened),
      listener(listener_params(options), notify_channel, options.operation_timeout, options.log, &listener_connects) {}

postgres_store::impl::~impl() {
  stop_async();
  {
    std::lock_guard lock(unanswered_mutex);
    settle_stop = true;
  }
  unanswered_changed.notify_all();
  if (settler.joinable()) settler.join();  // at most one statement, bounded by operation_timeout
}

result_ptr postgres_store::impl::run(connection_pool::checkout& c, statement_id id, const param_list& p,
                                     steady::time_point deadline) {
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

result_ptr postgres_store::impl::run_sql(connection_pool::checkout& c, const char* sql, const Oid* types,
                                         const param_list& p, steady::time_point deadline) {
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

void postgres_store::impl::failed(connection_pool::checkout& c, pg_error& e) {
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

void postgres_store::impl::answered() {
  if (!settle_awaits_server.load(std::memory_order_relaxed)) return;
  {
    std::lock_guard lock(unanswered_mutex);
    settle_awaits_server.store(false, std::memory_order_relaxed);
    settle_kicked = true;
  }
  unanswered_changed.notify_all();
}

void postgres_store::impl::fenced(fenced_call& call) {
  for (;;) {
    std::optional<connection_pool::checkout> c;
    try {
      c.emplace(pool.acquire(call.deadline()));
    } catch (const pg_error& e) {
      call.no_connection(e);
    }
    const int backend = PQbackendPID(c->get());
    result_ptr r;
    try {
      r = run(*c, call.statement(), call.params(), call.deadline());
    } catch (const pg_error& e) {
      c.reset();  // back to the pool (closed: it broke) before anything else is sent
      if (call.failed(e, backend)) continue;
    }
    call.answered(r.get());
    return;
  }
}

postgres_store::postgres_store(postgres_store_options options) : impl_(std::make_unique<impl>(std::move(options))) {}

postgres_store::~postgres_store() = default;

void postgres_store::complete(const identity& id, const lease_token& token, const payload& value, milliseconds ttl) {
  const digest d = id.key_digest();
  fenced_call call(*impl_, statement_id::complete, "complete", id, complete_params(id, d, token, value, ttl));
  impl_->fenced(call);
}

void postgres_store::release(const identity& id, const lease_token& token) {
  const digest d = id.key_digest();
  fenced_call call(*impl_, statement_id::release, "release", id, release_params(id, d, token), std::pair{d, token});
  impl_->fenced(call);
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
