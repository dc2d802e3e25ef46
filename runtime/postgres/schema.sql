-- idem PostgreSQL schema, format 1.
--
-- Creates the table of idempotency records and the claim function that idem::postgres_store
-- uses. Idempotent: run it as often as you like (idem::postgres_store::create_schema() runs this
-- very text under an advisory lock). Objects are created in the first schema of search_path; to
-- keep several applications apart, give each its own schema and set search_path in the conninfo
-- (options='-csearch_path=app1').
--
-- What a row holds:
--   scope, key_digest   the record's identity: the scope and the SHA-256 of the key. The raw key
--                       is never stored.
--   status              'in_progress' (held under lease_token until lease_expires_at) or
--                       'complete' (replayable until expires_at).
--   fingerprint         the request fingerprint of the acquisition, if the caller gave one.
--   payload_type        payload type tag; payload_body the payload's bytes;
--   payload_attributes  the payload's attributes, each pair encoded as
--                       <4-byte big-endian key length><key><4-byte big-endian value length><value>,
--                       in ascending key order.
--   expires_at          end of the replay window (complete) or of the retention of an abandoned
--                       acquisition (in progress); past it a complete record counts as absent.
-- All timestamps come from the database clock.

CREATE TABLE IF NOT EXISTS idem_records (
  scope              text        NOT NULL,
  key_digest         bytea       NOT NULL,
  status             text        NOT NULL,
  lease_token        uuid,
  lease_expires_at   timestamptz,
  fingerprint        text,
  payload_type       text,
  payload_body       bytea,
  payload_attributes bytea,
  created_at         timestamptz NOT NULL,
  completed_at       timestamptz,
  expires_at         timestamptz NOT NULL,
  CONSTRAINT idem_records_pkey PRIMARY KEY (scope, key_digest),
  CONSTRAINT idem_records_digest_size CHECK (octet_length(key_digest) = 32),
  CONSTRAINT idem_records_status CHECK (
    (status = 'in_progress' AND lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)
    OR (status = 'complete' AND payload_type IS NOT NULL AND completed_at IS NOT NULL))
);

CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);

COMMENT ON TABLE idem_records IS 'idem idempotency records, format 1';

-- idem_claim: claim-or-replay in one statement.
--
-- Inserts a new in-progress record, takes over one whose lease or replay window has passed, or
-- answers what holds it. One row comes back; `outcome` is one of
--   'acquired'   the caller now holds the record under p_token; retry_after_ms is 0 when it took
--                the record over from a holder whose lease had lapsed, NULL otherwise (a column of
--                its own would change the function's type, which CREATE OR REPLACE cannot)
--   'duplicate'  complete: stored_type/stored_body/stored_attributes/completed_at_us
--   'in_flight'  held by another lease; retry_after_ms is its remaining lease (never negative)
--   'mismatch'   complete with a different fingerprint; stored_fingerprint says which
--   'busy'       lost several races in a row; look again
-- A claim retried with the same token after a lost connection answers 'acquired' again.
-- p_lock_timeout_ms bounds the wait for the row lock when taking a record over (another session,
-- such as a caller's open transaction completing it, may hold it). Inserting an absent record
-- is bounded by the session's statement_timeout only: its lock waits are incidental and short.
CREATE OR REPLACE FUNCTION idem_claim(
    p_scope text, p_digest bytea, p_token uuid, p_lease_ms bigint, p_ttl_ms bigint,
    p_fingerprint text, p_lock_timeout_ms bigint)
  RETURNS TABLE (outcome text, retry_after_ms bigint, stored_fingerprint text, stored_type text,
                 stored_body bytea, stored_attributes bytea, completed_at_us bigint)
  LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
  ts      timestamptz;
  rec     idem_records%ROWTYPE;
  limited boolean := false;
  stolen  bigint;
BEGIN
  FOR attempt IN 1..8 LOOP
    SELECT * INTO rec FROM idem_records WHERE scope = p_scope AND key_digest = p_digest;
    -- The clock is read after the record: a holder that read it later but committed before the
    -- SELECT would otherwise have a lease ending more than its length after ts (an in_flight
    -- retry_after_ms longer than the lease itself; seen by the soak test).
    ts := clock_timestamp();

    IF FOUND AND rec.status = 'complete' AND rec.expires_at > ts THEN
      IF rec.fingerprint IS NOT NULL AND p_fingerprint IS NOT NULL
         AND rec.fingerprint <> p_fingerprint THEN
        RETURN QUERY SELECT 'mismatch'::text, NULL::bigint, rec.fingerprint, NULL::text,
                            NULL::bytea, NULL::bytea, NULL::bigint;
        RETURN;
      END IF;
      RETURN QUERY SELECT 'duplicate'::text, NULL::bigint, NULL::text, rec.payload_type,
                          rec.payload_body, rec.payload_attributes,
                          floor(extract(epoch FROM rec.completed_at) * 1000000)::bigint;
      RETURN;
    END IF;

    IF FOUND AND rec.status = 'in_progress' AND rec.lease_token = p_token THEN
      RETURN QUERY SELECT 'acquired'::text, NULL::bigint, NULL::text, NULL::text, NULL::bytea,
                          NULL::bytea, NULL::bigint;
      RETURN;
    END IF;

    IF FOUND AND rec.status = 'in_progress' AND rec.lease_expires_at > ts THEN
      RETURN QUERY SELECT 'in_flight'::text,
                          ceil(extract(epoch FROM rec.lease_expires_at - ts) * 1000)::bigint,
                          NULL::text, NULL::text, NULL::bytea, NULL::bytea, NULL::bigint;
      RETURN;
    END IF;

    stolen := NULL;
    IF NOT FOUND THEN
      IF limited THEN
        PERFORM set_config('lock_timeout', '0', true);
        limited := false;
      END IF;
      INSERT INTO idem_records AS r (scope, key_digest, status, lease_token, lease_expires_at,
                                     fingerprint, created_at, expires_at)
      VALUES (p_scope, p_digest, 'in_progress', p_token, ts + p_lease_ms * interval '1 millisecond',
              p_fingerprint, ts, ts + p_ttl_ms * interval '1 millisecond')
      ON CONFLICT (scope, key_digest) DO NOTHING;
    ELSE
      -- The lease or the replay window has passed. The WHERE clause is evaluated again on the
      -- newest row version if another session changed it meanwhile.
      IF NOT limited THEN
        PERFORM set_config('lock_timeout', greatest(p_lock_timeout_ms, 1)::text, true);
        limited := true;
      END IF;
      IF rec.status = 'in_progress' THEN
        stolen := 0;
      END IF;
      UPDATE idem_records
         SET status = 'in_progress', lease_token = p_token,
             lease_expires_at = ts + p_lease_ms * interval '1 millisecond',
             fingerprint = p_fingerprint, payload_type = NULL, payload_body = NULL,
             payload_attributes = NULL, completed_at = NULL, created_at = ts,
             expires_at = ts + p_ttl_ms * interval '1 millisecond'
       WHERE scope = p_scope AND key_digest = p_digest
         AND ((status = 'complete' AND expires_at <= ts)
              OR (status = 'in_progress' AND lease_expires_at <= ts));
    END IF;
    IF FOUND THEN
      RETURN QUERY SELECT 'acquired'::text, stolen, NULL::text, NULL::text, NULL::bytea,
                          NULL::bytea, NULL::bigint;
      RETURN;
    END IF;
    -- Another session changed the record between our look and our write: look again.
  END LOOP;
  RETURN QUERY SELECT 'busy'::text, 0::bigint, NULL::text, NULL::text, NULL::bytea, NULL::bytea,
                      NULL::bigint;
END;
$$;
