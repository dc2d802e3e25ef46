// runtime/postgres/administration.cpp — postgres_store's administration: inspect, list, release,
// count, one unprepared statement each (they are rare) on a pooled connection.
#include <idem/detail/attributes_codec.hpp>
#include <idem/deadline.hpp>
#include <idem/errors.hpp>

#include "store_impl.hpp"

namespace idem {

namespace {

using namespace detail::pg;
using std::chrono::system_clock;

// Times as milliseconds since the epoch on the database's clock; the last column is its now.
constexpr const char* summary_columns =
    "scope, key_digest, status, floor(extract(epoch FROM lease_expires_at) * 1000)::int8,"
    " floor(extract(epoch FROM expires_at) * 1000)::int8, fingerprint IS NOT NULL, payload_type,"
    " coalesce(octet_length(payload_body), 0)::int8, floor(extract(epoch FROM completed_at) * 1000)::int8,"
    " floor(extract(epoch FROM created_at) * 1000)::int8, floor(extract(epoch FROM statement_timestamp()) * 1000)::int8";

const std::string inspect_sql = std::string("SELECT ") + summary_columns +
                                ", payload_body, payload_attributes FROM idem_records"
                                " WHERE scope = $1 AND key_digest = $2";
// $1 scope or NULL, $2 status or NULL, $3 minimum age in ms, $4 limit.
const std::string list_sql = std::string("SELECT ") + summary_columns +
                             " FROM idem_records WHERE ($1::text IS NULL OR scope = $1)"
                             " AND ($2::text IS NULL OR status = $2)"
                             " AND created_at <= statement_timestamp() - $3 * interval '1 millisecond'"
                             " ORDER BY created_at, scope, key_digest LIMIT $4";
// $3 = 1 ends a live lease too; $4 the notify payload. One row: deleted (0/1), the status seen.
constexpr const char* admin_release_sql =
    "WITH gone AS ("
    " DELETE FROM idem_records"
    "  WHERE scope = $1 AND key_digest = $2 AND status = 'in_progress'"
    "    AND (lease_expires_at <= statement_timestamp() OR $3 = 1)"
    " RETURNING pg_notify('idem_records', $4))"
    " SELECT (SELECT count(*) FROM gone), cur.status"
    "   FROM (SELECT 1) AS one"
    "   LEFT JOIN idem_records AS cur ON cur.scope = $1 AND cur.key_digest = $2";
// The states of record_counts::add (store_admin.cpp), in SQL.
constexpr const char* count_sql =
    "SELECT count(*) FILTER (WHERE status = 'in_progress' AND lease_expires_at > statement_timestamp()),"
    " count(*) FILTER (WHERE status = 'in_progress' AND lease_expires_at <= statement_timestamp()"
    "                    AND expires_at > statement_timestamp()),"
    " count(*) FILTER (WHERE status = 'complete' AND expires_at > statement_timestamp()),"
    " count(*) FILTER (WHERE expires_at <= statement_timestamp()"
    "                    AND (status <> 'in_progress' OR lease_expires_at <= statement_timestamp()))"
    " FROM idem_records";

system_clock::time_point at_ms(std::int64_t ms) { return system_clock::time_point(std::chrono::milliseconds(ms)); }

// One row of inspect_sql or list_sql. Stored bytes are not trusted: a row idem could not have
// written is refused, naming the record.
record_summary read_summary(const PGresult* r, int row, bool with_payload) {
  record_summary s;
  s.scope = get_bytes(r, row, 0);
  const std::string key_digest = get_bytes(r, row, 1);
  if (key_digest.size() == s.key_digest.size()) std::copy(key_digest.begin(), key_digest.end(), s.key_digest.begin());
  const std::string name = s.to_string();
  auto corrupt = [&](std::string_view why) {
    return corrupt_record_error("postgres_store: cannot read " + name + ": " + std::string(why), "inspect", name);
  };
  if (key_digest.size() != s.key_digest.size()) throw corrupt("its key digest is not 32 bytes");
  constexpr std::int64_t max_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(system_clock::duration::max()).count();
  auto time_of = [&](int column) {
    if (is_null(r, row, column)) throw corrupt("a time is missing");
    const std::int64_t ms = get_int8(r, row, column);
    if (ms < 0 || ms > max_ms) throw corrupt("a time is out of range");
    return at_ms(ms);
  };
  s.read_at = time_of(10);
  s.created_at = time_of(9);
  s.expires_at = time_of(4);
  s.has_fingerprint = get_bool(r, row, 5);
  const std::string status = get_bytes(r, row, 2);
  if (status == "in_progress") {
    s.state = record_state::in_progress;
    s.lease_expires_at = time_of(3);
  } else if (status == "complete") {
    s.state = record_state::completed;
    s.completed_at = time_of(8);
    s.payload_type = get_bytes(r, row, 6);
    s.payload_size = static_cast<std::size_t>(std::max<std::int64_t>(get_int8(r, row, 7), 0));
    if (with_payload) {
      payload value{.type = s.payload_type, .body = get_bytes(r, row, 11), .attributes = {}};
      std::optional<detail::attribute_map> attributes = detail::decode_attributes(get_bytes(r, row, 12));
      if (!attributes) throw corrupt("its payload attributes are malformed");
      value.attributes = std::move(*attributes);
      s.value = std::move(value);
    }
  } else {
    throw corrupt("its status is unknown");
  }
  return s;
}

}  // namespace

std::optional<record_summary> postgres_store::inspect_record(const identity& id, bool with_payload) {
  const digest d = id.key_digest();
  param_list p;
  p.text(id.scope()).bytes(d.data(), d.size());
  const Oid types[] = {oid_text, oid_bytea};
  const auto deadline = deadline_after(impl_->options.operation_timeout);
  try {
    auto c = impl_->pool.acquire(deadline);
    const result_ptr r = impl_->run_sql(c, inspect_sql.c_str(), types, p, deadline);
    if (PQntuples(r.get()) == 0) return std::nullopt;
    return read_summary(r.get(), 0, with_payload);
  } catch (const pg_error& e) {
    throw_unavailable("inspect", id.to_string(), e);
  }
}

std::vector<record_summary> postgres_store::list_records(const record_query& query) {
  query.validate();
  param_list p;
  if (query.scope) {
    p.text(*query.scope);
  } else {
    p.null();
  }
  if (query.state) {
    p.text(*query.state == record_state::in_progress ? "in_progress" : "complete");
  } else {
    p.null();
  }
  p.int8(query.older_than.count()).int8(static_cast<std::int64_t>(query.limit));
  const Oid types[] = {oid_text, oid_text, oid_int8, oid_int8};
  const auto deadline = deadline_after(impl_->options.operation_timeout);
  try {
    auto c = impl_->pool.acquire(deadline);
    const result_ptr r = impl_->run_sql(c, list_sql.c_str(), types, p, deadline);
    std::vector<record_summary> records;
    for (int row = 0; row < PQntuples(r.get()); ++row) records.push_back(read_summary(r.get(), row, false));
    return records;
  } catch (const pg_error& e) {
    throw_unavailable("list records", {}, e);
  }
}

admin_release postgres_store::release_record(const identity& id, bool end_live_lease) {
  const digest d = id.key_digest();
  param_list p;
  p.text(id.scope()).bytes(d.data(), d.size()).int8(end_live_lease ? 1 : 0).text(record_key(id, d));
  const Oid types[] = {oid_text, oid_bytea, oid_int8, oid_text};
  const auto deadline = deadline_after(impl_->options.operation_timeout);
  try {
    auto c = impl_->pool.acquire(deadline);
    const result_ptr r = impl_->run_sql(c, admin_release_sql, types, p, deadline);
    if (get_int8(r.get(), 0, 0) == 1) return admin_release::released;
    if (is_null(r.get(), 0, 1)) return admin_release::not_found;
    return get_bytes(r.get(), 0, 1) == "complete" ? admin_release::completed : admin_release::lease_live;
  } catch (const pg_error& e) {
    throw_unavailable("release", id.to_string(), e);
  }
}

record_counts postgres_store::count_records() {
  const param_list p;
  const auto deadline = deadline_after(impl_->options.operation_timeout);
  try {
    auto c = impl_->pool.acquire(deadline);
    const result_ptr r = impl_->run_sql(c, count_sql, nullptr, p, deadline);
    auto n = [&](int column) { return static_cast<std::size_t>(std::max<std::int64_t>(get_int8(r.get(), 0, column), 0)); };
    return {.in_progress = n(0), .abandoned = n(1), .completed = n(2), .expired = n(3)};
  } catch (const pg_error& e) {
    throw_unavailable("count records", {}, e);
  }
}

}  // namespace idem
