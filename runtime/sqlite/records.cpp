// runtime/sqlite/records.cpp — reading a record back, judging what it means for a caller, and the
// statements that claim and complete it.
#include <filesystem>

#include <idem/detail/attributes_codec.hpp>
#include <idem/transaction.hpp>

#include "store_parts.hpp"

namespace idem::detail::sq {

std::int64_t clock_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

milliseconds left_until(steady::time_point deadline) noexcept {
  const auto now = steady::now();
  if (deadline <= now) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(deadline - now);
}

bool is_busy(int code) noexcept {
  return (code & 0xff) == SQLITE_BUSY;
}

std::string describe(std::string_view operation, const identity& id) {
  std::string text = "sqlite_store: cannot ";
  text += operation;
  text += ' ';
  text += id.to_string();
  return text;
}

std::optional<stored_record> read_record(bound_statement& s, const record_key& key, const identity& id) {
  key.bind(s);
  if (!s.step("read the record")) return std::nullopt;
  stored_record r;
  r.state = s.integer(0);
  r.lease_expires_at = s.is_null(2) ? 0 : s.integer(2);
  r.expires_at = s.integer(3);
  if (!s.is_null(4)) r.fingerprint = s.bytes(4);
  if (r.state == state_complete) {
    if (s.is_null(5)) throw corrupt_record_error(describe("read", id) + ": a complete record has no payload type", "read", id.to_string());
    r.value.type = s.bytes(5);
    r.value.body = s.bytes(6);
    std::optional<detail::attribute_map> attributes = detail::decode_attributes(s.bytes(7));
    if (!attributes) throw corrupt_record_error(describe("read", id) + ": its payload attributes are malformed", "read", id.to_string());
    r.value.attributes = std::move(*attributes);
    r.completed_at = s.is_null(8) ? 0 : s.integer(8);
    // A time the replay's system_clock::time_point cannot hold (negative, or past the year 2262)
    // would overflow converting it.
    if (r.completed_at < 0 || r.completed_at > max_time_point_ms)
      throw corrupt_record_error(describe("read", id) + ": its completion time is out of range", "read", id.to_string());
  } else if (r.state == state_in_progress) {
    std::optional<lease_token> token = lease_token::from_bytes(s.bytes(1));
    if (!token || s.is_null(2))
      throw corrupt_record_error(describe("read", id) + ": a record in progress has no valid lease", "read", id.to_string());
    r.token = *token;
  } else {
    throw corrupt_record_error(describe("read", id) + ": unknown state " + std::to_string(r.state), "read",
                               id.to_string());
  }
  return r;
}

std::optional<stored_record> read_record(const sqlite_connection& c, const record_key& key, const identity& id) {
  bound_statement s(c, statement::select_record);
  return read_record(s, key, id);
}

verdict judge(std::optional<stored_record> row, const context& ctx, std::int64_t now) {
  if (!row) return claimable{};
  if (row->state == state_complete) {
    if (row->expires_at <= now) return claimable{};
    if (ctx.fingerprint && row->fingerprint && *ctx.fingerprint != *row->fingerprint)
      return fingerprint_mismatch{std::move(*row->fingerprint), *ctx.fingerprint};
    return duplicate{std::move(row->value), std::chrono::system_clock::time_point(milliseconds(row->completed_at))};
  }
  if (row->lease_expires_at <= now) return claimable{/*lapsed_lease=*/true};
  return held{milliseconds(row->lease_expires_at - now), row->token};
}

std::string lost_reason(const sqlite_connection* c, sqlite3* db, std::string_view table, const record_key& key,
                        const lease_token& token) {
  std::optional<bound_statement> owned;
  std::optional<bound_statement> cached;
  bound_statement& s = c != nullptr ? cached.emplace(*c, statement::inspect)
                                    : owned.emplace(db, statement::inspect, table, "inspect the record");
  key.bind(s);
  if (!s.step("inspect the record"))
    return "no record exists (it was released, purged or never acquired), so the lease is lost";
  if (s.integer(0) == state_complete) return "the record is already complete; its lease has ended";
  std::optional<lease_token> holder = lease_token::from_bytes(s.bytes(1));
  if (holder && *holder == token) return "the record is not in progress under this lease";
  return "the lease no longer owns the record: it expired and another caller took the record over";
}

int run_complete(bound_statement& s, const record_key& key, const lease_token& token, const payload& value,
                 milliseconds ttl, std::int64_t now) {
  const auto token_blob = token.to_bytes();
  const std::string attributes = detail::encode_attributes(value.attributes);
  key.bind(s);
  s.blob(3, token_blob.data(), token_blob.size());
  s.text(4, value.type);
  s.blob(5, value.body.data(), value.body.size());
  s.blob(6, attributes.data(), attributes.size());
  s.integer(7, now);
  s.integer(8, saturating_add(now, ttl));
  s.step("write the completion");
  return s.changes();
}

int run_claim(bound_statement& s, const record_key& key, const context& ctx, const lease_token& token,
              std::int64_t now) {
  const auto token_blob = token.to_bytes();
  key.bind(s);
  s.blob(3, token_blob.data(), token_blob.size());
  s.integer(4, saturating_add(now, ctx.lease));
  s.integer(5, saturating_add(now, ctx.ttl));
  if (ctx.fingerprint) {
    s.text(6, *ctx.fingerprint);
  } else {
    s.null(6);
  }
  s.integer(7, now);
  s.step("claim the record");
  return s.changes();
}

std::string_view main_file(sqlite3* db) {
  const char* name = sqlite3_db_filename(db, "main");
  return name != nullptr ? std::string_view(name) : std::string_view();
}

bool same_file(sqlite3* db, const std::string& filename) {
  const std::string_view name = main_file(db);
  if (name.empty()) return false;
  if (name == filename) return true;
  std::error_code ec;
  return std::filesystem::equivalent(std::filesystem::path(name), std::filesystem::path(filename), ec);
}

sqlite_transaction* own_transaction(const std::string& filename) {
  auto* tx = dynamic_cast<sqlite_transaction*>(current_transaction());
  if (tx == nullptr || !tx->active() || !same_file(tx->connection(), filename)) return nullptr;
  return tx;
}

}  // namespace idem::detail::sq
