// runtime/sqlite/administration.cpp — sqlite_store's administration: inspect, list, release,
// count, each one statement on a connection of the store's pool.
#include "store_parts.hpp"

#include <idem/detail/attributes_codec.hpp>

namespace idem {

namespace {

using std::chrono::system_clock;

system_clock::time_point at_ms(std::int64_t ms) { return system_clock::time_point(std::chrono::milliseconds(ms)); }

// One row of admin_select or admin_list (columns as admin_columns in sqlite_connection.cpp).
// Stored bytes are not trusted: a row idem could not have written is refused, naming the record.
record_summary read_summary(const bound_statement& s, std::int64_t now, bool with_payload) {
  record_summary r;
  r.scope = s.bytes(0);
  const std::string digest = s.bytes(1);
  if (digest.size() == r.key_digest.size()) std::copy(digest.begin(), digest.end(), r.key_digest.begin());
  const std::string name = r.to_string();
  auto corrupt = [&](std::string_view why) {
    return corrupt_record_error("sqlite_store: cannot read " + name + ": " + std::string(why), "inspect", name);
  };
  if (digest.size() != r.key_digest.size()) throw corrupt("its key digest is not 32 bytes");
  auto time_of = [&](int column) {
    const std::int64_t ms = s.integer(column);
    if (s.is_null(column) || ms < 0 || ms > max_time_point_ms) throw corrupt("a time is missing or out of range");
    return at_ms(ms);
  };
  r.read_at = at_ms(now);
  r.created_at = time_of(9);
  r.expires_at = time_of(4);
  r.has_fingerprint = s.integer(5) != 0;
  const std::int64_t state = s.integer(2);
  if (state == state_in_progress) {
    r.state = record_state::in_progress;
    r.lease_expires_at = time_of(3);
  } else if (state == state_complete) {
    r.state = record_state::completed;
    r.completed_at = time_of(8);
    r.payload_type = s.bytes(6);
    r.payload_size = static_cast<std::size_t>(std::max<std::int64_t>(s.integer(7), 0));
    if (with_payload) {
      payload value{.type = r.payload_type, .body = s.bytes(10), .attributes = {}};
      std::optional<detail::attribute_map> attributes = detail::decode_attributes(s.bytes(11));
      if (!attributes) throw corrupt("its payload attributes are malformed");
      value.attributes = std::move(*attributes);
      r.value = std::move(value);
    }
  } else {
    throw corrupt("its state is unknown");
  }
  return r;
}

}  // namespace

std::optional<record_summary> sqlite_store::inspect_record(const identity& id, bool with_payload) {
  state& s = *state_;
  const record_key key(id);
  try {
    auto loan = s.pool.borrow(deadline_after(s.options.busy_timeout));
    bound_statement select(loan->handle(), statement::admin_select, s.options.table, "prepare the inspection");
    key.bind(select);
    if (!select.step("read the record")) return std::nullopt;
    return read_summary(select, clock_ms(), with_payload);
  } catch (const sqlite_failure& f) {
    s.unavailable("inspect", &id, f.what());
  }
}

std::vector<record_summary> sqlite_store::list_records(const record_query& query) {
  query.validate();
  state& s = *state_;
  try {
    auto loan = s.pool.borrow(deadline_after(s.options.busy_timeout));
    bound_statement select(loan->handle(), statement::admin_list, s.options.table, "prepare the listing");
    const std::int64_t now = clock_ms();
    if (query.scope) {
      select.text(1, *query.scope);
    } else {
      select.null(1);
    }
    if (query.state) {
      select.integer(2, *query.state == record_state::in_progress ? state_in_progress : state_complete);
    } else {
      select.null(2);
    }
    select.integer(3, now - query.older_than.count());
    select.integer(4, static_cast<std::int64_t>(query.limit));
    std::vector<record_summary> records;
    while (select.step("list records")) records.push_back(read_summary(select, now, false));
    return records;
  } catch (const sqlite_failure& f) {
    s.unavailable("list records", nullptr, f.what());
  }
}

admin_release sqlite_store::release_record(const identity& id, bool end_live_lease) {
  state& s = *state_;
  const record_key key(id);
  try {
    s.refuse_self_lock("release", id);
    write_transaction tx(s.writer, s.pool, s.options.busy_timeout, deadline_after(s.options.busy_timeout),
                         "begin the release");
    s.require_locked(tx, "release", id);
    const std::int64_t now = clock_ms();
    int deleted = 0;
    {
      bound_statement del(tx.connection().handle(), statement::admin_release, s.options.table, "prepare the release");
      key.bind(del);
      del.integer(3, now);
      del.integer(4, end_live_lease ? 1 : 0);
      del.step("delete the record");
      deleted = del.changes();
    }
    if (deleted == 1) {
      tx.commit("commit the release");
      s.waiters->notify(key.waiter_name());
      return admin_release::released;
    }
    // Nothing deleted: why, read under the same write lock.
    bound_statement select(tx.connection().handle(), statement::admin_select, s.options.table, "prepare the look");
    key.bind(select);
    if (!select.step("read the record")) return admin_release::not_found;
    return select.integer(2) == state_complete ? admin_release::completed : admin_release::lease_live;
  } catch (const sqlite_failure& f) {
    s.unavailable("release", &id, f.what());
  }
}

record_counts sqlite_store::count_records() {
  state& s = *state_;
  try {
    auto loan = s.pool.borrow(deadline_after(s.options.busy_timeout));
    bound_statement count(loan->handle(), statement::admin_count, s.options.table, "prepare the count");
    count.integer(1, clock_ms());
    if (!count.step("count records")) return {};
    auto n = [&](int column) { return static_cast<std::size_t>(std::max<std::int64_t>(count.integer(column), 0)); };
    return {.in_progress = n(0), .abandoned = n(1), .completed = n(2), .expired = n(3)};
  } catch (const sqlite_failure& f) {
    s.unavailable("count records", nullptr, f.what());
  }
}

}  // namespace idem
