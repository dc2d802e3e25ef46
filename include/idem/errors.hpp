// idem/errors.hpp — the exception hierarchy of idem.
//
// Expected outcomes (a duplicate, an in-flight answer) are values, see <idem/outcome.hpp>.
// Exceptions are kept for misuse, bad configuration and infrastructure failure. Every message
// names the record as `Scope/#xxxxxxxx` and never contains a raw idempotency key.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

namespace idem {

// idem::error
//
// Base of every exception idem throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad configuration: a duration out of range, a scope that breaks the identity rules, a
// join-transaction request against a store that cannot honour it. Thrown when an engine or a
// context is constructed, never later.
class configuration_error : public error {
 public:
  using error::error;
};

// A key that breaks the identity rules (empty, longer than 255 bytes). Keys are client data, so
// the message describes the rule, never the key.
class invalid_key_error : public error {
 public:
  using error::error;
};

// Base of failures raised by a store. Besides the message it carries what failed as data: the
// operation ("try_acquire", "complete", "release", "extend", "purge_expired", ...) and the record
// as identity::to_string() renders it ("Scope/#xxxxxxxx", never the key). Either is empty when
// the failure concerns no operation or no single record (opening the store, for example).
class store_error : public error {
 public:
  explicit store_error(const std::string& message, std::string operation = {}, std::string record = {})
      : error(message), operation_(std::move(operation)), record_(std::move(record)) {}

  const std::string& operation() const noexcept { return operation_; }
  const std::string& record() const noexcept { return record_; }

 private:
  std::string operation_;
  std::string record_;
};

// A mutation (complete, release) by a holder whose lease no longer owns the record: it expired
// and was stolen, the record is absent, or it is no longer in progress.
class lease_lost_error : public store_error {
 public:
  using store_error::store_error;
};

// The backend cannot be reached or answered with an error. The message names the operation and
// the masked record.
class store_unavailable_error : public store_error {
 public:
  using store_error::store_error;
};

// The request was sent and no answer came (a timeout, or the connection broke after the send): the
// backend may have run it, may run it later (a frozen server that wakes runs what it had already
// received, even after the client closed the connection), or may never run it. The caller must
// not assume either way: a complete or release may have taken effect, a claim may have left the
// record in progress under a token nobody holds (the key then answers in flight until that lease
// expires). A store_unavailable_error that is not an outcome_unknown_error means the request
// certainly took no effect (it was never sent, or the backend refused it).
class outcome_unknown_error : public store_unavailable_error {
 public:
  using store_unavailable_error::store_unavailable_error;
};

// A stored record is malformed or in a format this version does not understand.
class corrupt_record_error : public store_error {
 public:
  using store_error::store_error;
};

// The store's namespace holds data idem did not write; it is refused and never modified.
class foreign_record_error : public store_error {
 public:
  using store_error::store_error;
};

// A mutation was accepted but the durability the store was asked for (for example replica
// acknowledgement) could not be confirmed.
class durability_error : public store_error {
 public:
  using store_error::store_error;
};

// The key was used before with a different request fingerprint.
class fingerprint_mismatch_error : public error {
 public:
  fingerprint_mismatch_error(const std::string& record, std::string stored, std::string received);
  const std::string& stored() const noexcept { return stored_; }
  const std::string& received() const noexcept { return received_; }

 private:
  std::string stored_;
  std::string received_;
};

// Another caller holds the record and did not finish within this caller's wait. retry_after() is
// the holder's remaining lease: a sensible delay before redelivering.
class in_flight_error : public error {
 public:
  in_flight_error(const std::string& record, std::chrono::milliseconds retry_after);
  std::chrono::milliseconds retry_after() const noexcept { return retry_after_; }

 private:
  std::chrono::milliseconds retry_after_;
};

// Never thrown: handed to lifecycle listeners as the cause of failed{rollback} when the caller's
// transaction rolled back and the record was released.
class rollback_error : public error {
 public:
  explicit rollback_error(const std::string& record);
};

}  // namespace idem
