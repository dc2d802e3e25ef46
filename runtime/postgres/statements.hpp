// runtime/postgres/statements.hpp — the statements postgres_store sends, one per operation.
//
// Each is prepared once per pooled connection, on first use. Parameters and results travel in
// binary format. complete and release notify the channel `idem_records` with the record's key
// (`<scope>:<hex digest>`) in the same statement, so waiters hear of it exactly when it commits.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "pg_connection.hpp"

namespace idem::detail::pg {

inline constexpr const char* notify_channel = "idem_records";

enum class statement_id : unsigned { claim, complete, release, extend, purge };
inline constexpr std::size_t statement_count = 5;

struct statement {
  const char* name;
  const char* sql;
  int param_count;
  std::array<Oid, 8> types;
};

// Claim-or-replay (see idem_claim in schema.sql). Params: scope, digest, token, lease ms, ttl ms,
// fingerprint (nullable), lock timeout ms. One row: outcome, retry_after_ms, stored_fingerprint,
// stored_type, stored_body, stored_attributes, completed_at_us.
inline constexpr const char* claim_sql =
    "SELECT outcome, retry_after_ms, stored_fingerprint, stored_type, stored_body, stored_attributes, "
    "completed_at_us FROM idem_claim($1, $2, $3, $4, $5, $6, $7)";

// in progress under $3 -> complete. Params: scope, digest, token, type, body, attributes, ttl ms,
// notify payload. One row: updated (0/1), then for a diagnosis of what holds the record: status,
// held under $3, replay window still open (NULLs if absent).
inline constexpr const char* complete_sql =
    "WITH done AS ("
    " UPDATE idem_records"
    "    SET status = 'complete', lease_token = NULL, lease_expires_at = NULL,"
    "        payload_type = $4, payload_body = $5, payload_attributes = $6,"
    "        completed_at = statement_timestamp(),"
    "        expires_at = statement_timestamp() + $7 * interval '1 millisecond'"
    "  WHERE scope = $1 AND key_digest = $2 AND status = 'in_progress' AND lease_token = $3"
    " RETURNING pg_notify('idem_records', $8))"
    " SELECT (SELECT count(*) FROM done), cur.status, cur.lease_token = $3,"
    "        cur.expires_at > statement_timestamp()"
    "   FROM (SELECT 1) AS one"
    "   LEFT JOIN idem_records AS cur ON cur.scope = $1 AND cur.key_digest = $2";

// Deletes the record held under $3. Params: scope, digest, token, notify payload. Row as complete.
inline constexpr const char* release_sql =
    "WITH gone AS ("
    " DELETE FROM idem_records"
    "  WHERE scope = $1 AND key_digest = $2 AND status = 'in_progress' AND lease_token = $3"
    " RETURNING pg_notify('idem_records', $4))"
    " SELECT (SELECT count(*) FROM gone), cur.status, cur.lease_token = $3,"
    "        cur.expires_at > statement_timestamp()"
    "   FROM (SELECT 1) AS one"
    "   LEFT JOIN idem_records AS cur ON cur.scope = $1 AND cur.key_digest = $2";

// Moves the lease of the record held under $3. Params: scope, digest, token, lease ms. A row
// locked by another session (a caller's open transaction completing it) is skipped, never waited
// for: the heartbeat must not block.
inline constexpr const char* extend_sql =
    "UPDATE idem_records SET lease_expires_at = statement_timestamp() + $4 * interval '1 millisecond'"
    " WHERE (scope, key_digest) IN ("
    "   SELECT scope, key_digest FROM idem_records"
    "    WHERE scope = $1 AND key_digest = $2 AND status = 'in_progress' AND lease_token = $3"
    "    FOR UPDATE SKIP LOCKED)";

// Deletes up to $1 records past their ttl that nobody holds. One row: how many.
inline constexpr const char* purge_sql =
    "WITH gone AS ("
    " DELETE FROM idem_records WHERE (scope, key_digest) IN ("
    "   SELECT scope, key_digest FROM idem_records"
    "    WHERE expires_at <= statement_timestamp()"
    "      AND (status <> 'in_progress' OR lease_expires_at <= statement_timestamp())"
    "    LIMIT $1 FOR UPDATE SKIP LOCKED)"
    " RETURNING 1)"
    " SELECT count(*) FROM gone";

// Moves the lease of the record held under $3, inside the caller's transaction: no SKIP LOCKED,
// since that transaction may hold the row's lock itself. Params as extend.
inline constexpr const char* extend_in_transaction_sql =
    "UPDATE idem_records SET lease_expires_at = statement_timestamp() + $4 * interval '1 millisecond'"
    " WHERE scope = $1 AND key_digest = $2 AND status = 'in_progress' AND lease_token = $3";

// Which idem_records table a connection's statements reach. One row: the cluster's system
// identifier (NULL where pg_control_system() is not granted), the postmaster's start time in
// microseconds since the epoch (the fallback cluster check), the database's oid and name, the oid
// of the idem_records table its search_path resolves (0: none), and whether the server is a
// standby (which shares its primary's system identifier and OIDs but cannot write).
inline constexpr const char* database_identity_sql =
    "SELECT CASE WHEN has_function_privilege('pg_control_system()', 'execute')"
    "            THEN (SELECT system_identifier FROM pg_control_system()) END,"
    "       floor(extract(epoch FROM pg_postmaster_start_time()) * 1000000)::int8,"
    "       (SELECT oid FROM pg_database WHERE datname = current_database())::int8, current_database()::text,"
    "       coalesce(to_regclass('idem_records')::oid::int8, 0), pg_is_in_recovery()";

inline constexpr std::array<statement, statement_count> statements{{
    {"idem_claim", claim_sql, 7, {oid_text, oid_bytea, oid_uuid, oid_int8, oid_int8, oid_text, oid_int8, 0}},
    {"idem_complete",
     complete_sql,
     8,
     {oid_text, oid_bytea, oid_uuid, oid_text, oid_bytea, oid_bytea, oid_int8, oid_text}},
    {"idem_release", release_sql, 4, {oid_text, oid_bytea, oid_uuid, oid_text, 0, 0, 0, 0}},
    {"idem_extend", extend_sql, 4, {oid_text, oid_bytea, oid_uuid, oid_int8, 0, 0, 0, 0}},
    {"idem_purge", purge_sql, 1, {oid_int8, 0, 0, 0, 0, 0, 0, 0}},
}};

inline const statement& statement_for(statement_id id) noexcept {
  return statements[static_cast<std::size_t>(id)];
}

// The text of schema.sql, embedded at build time (schema.cpp, generated).
extern const std::string_view schema_text;

}  // namespace idem::detail::pg
