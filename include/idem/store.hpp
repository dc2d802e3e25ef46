// idem/store.hpp — the interface every idempotency store implements.
//
// A record moves through a small state machine:
//
//     absent ──try_acquire──> in progress (lease, token) ──complete──> complete (payload, ttl)
//        ^                          │    ^                                  │
//        └──────── release ─────────┘    └── steal: lease expired ──┐       │ ttl passed:
//                                                                   │       v treated as absent
//                                        try_acquire by another caller     (purge deletes it)
//
// Implementation requirements (every store passes the contract suite, testing/ and idem::testing):
// - try_acquire is the only entry point. It blocks up to ctx.wait *inside the store* for a holder
//   to finish (zero wait = look once), steals an expired lease atomically (and says so in
//   acquired::took_over), treats a complete record past its ttl as absent, and applies the
//   fingerprint rule: a mismatch only when both the stored and the incoming fingerprint exist and
//   differ, checked against complete records.
// - Every acquisition issues a fresh lease_token. complete and release apply only while the record
//   is in progress under that token, else they throw lease_lost_error; extend is then a silent
//   no-op.
// - Timestamps come from the store's own clock (database, Redis TIME, the process clock).
// - Stores persist the scope and the key's digest; a remote store never writes the raw key.
// - Failures of the backend are store_unavailable_error naming the operation and the masked
//   record, never a hang: every blocking call is bounded.
// - All member functions are safe to call from many threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <idem/async.hpp>
#include <idem/context.hpp>
#include <idem/identity.hpp>
#include <idem/lease_token.hpp>
#include <idem/payload.hpp>
#include <idem/store_admin.hpp>

namespace idem {

class transaction;

// The caller now holds the record under `token` and must complete or release it. `took_over`:
// the record was in progress under another lease that had lapsed (its holder crashed, or stalled
// past its lease), and this claim replaced that lease; false for a fresh or expired record.
struct acquired {
  lease_token token;
  bool took_over = false;
};

// The record is complete: replay `value`. `completed_at` is the store's clock at completion.
// `from_cache`: the store answered from its own in-process copy, without reaching its backend.
struct duplicate {
  payload value;
  std::chrono::system_clock::time_point completed_at;
  bool from_cache = false;
};

// Another caller holds the record and did not finish within the wait. `retry_after` is the
// holder's remaining lease, never negative.
struct in_flight {
  std::chrono::milliseconds retry_after{0};
};

// The record is complete but was created with a different request fingerprint.
struct fingerprint_mismatch {
  std::string stored;
  std::string received;
};

// What try_acquire answers.
using acquire_result = std::variant<acquired, duplicate, in_flight, fingerprint_mismatch>;

// idem::store
//
// The narrow interface between the engine and a storage technology. See the file comment for the
// state machine and the requirements.
class store {
 public:
  virtual ~store() = default;

  // Claims `ctx.id` or answers what holds it; blocks at most ctx.wait (plus one bounded round
  // trip). Precondition: ctx.validate() passed.
  [[nodiscard]] virtual acquire_result try_acquire(const context& ctx) = 0;

  // try_acquire's answer when the store has it at hand, with no wait and no I/O: nullopt when it
  // would need either (a holder to wait for, a round trip). What engine::run_at_once asks first, so
  // that an asynchronous call answered at once costs what a blocking one costs. Only a store that
  // is in_process() may answer `acquired` (the engine then completes on the caller's thread);
  // another may answer from a copy of its own (a replay from a local cache). The default: nullopt.
  [[nodiscard]] virtual std::optional<acquire_result> try_acquire_at_once(const context& ctx);

  // In progress under `token` -> complete with `value`, replayable for `ttl` from now.
  // Throws lease_lost_error if the record is absent, complete, or held under another token.
  virtual void complete(const identity& id, const lease_token& token, const payload& value,
                        std::chrono::milliseconds ttl) = 0;

  // Deletes the record held under `token`, so the next caller acquires it afresh.
  // Throws lease_lost_error if the record is absent, complete, or held under another token.
  virtual void release(const identity& id, const lease_token& token) = 0;

  // Moves the lease of a record held under `token` to now + `lease` and returns true. Returns
  // false, changing nothing, if the record is absent, complete, or held under another token.
  [[nodiscard]] virtual bool extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) = 0;

  // Like extend, but inside `tx` on the caller's connection when the store can join `tx` (so that
  // the check holds until `tx` commits); the default calls extend. The engine calls it just
  // before a transaction whose action it guards commits: false fails that commit.
  [[nodiscard]] virtual bool extend_in_transaction(const identity& id, const lease_token& token,
                                                   std::chrono::milliseconds lease, transaction& tx);

  // Deletes every record whose ttl has passed and that nobody holds (an in-progress record also
  // needs an expired lease). Returns how many it deleted. Safe to run concurrently with anything.
  virtual std::size_t purge_expired() = 0;

  // How many callers are blocked inside try_acquire on this store object right now, waiting for
  // a holder to finish: each counts from the moment its look found the record held and it is
  // about to block (a store that waits on an event has subscribed by then, so a completion from
  // then on reaches it) until it returns. A statistic, and what tests wait on instead of sleeping.
  virtual std::size_t waiting() const noexcept = 0;

  // True if complete_in_transaction can write the record inside a caller's transaction.
  virtual bool supports_transactional_completion() const noexcept { return false; }

  // Empty if complete_in_transaction can write inside `tx` (a transaction of this store's kind on
  // the same database), otherwise why not. The engine asks before acquiring, so that a
  // join-transaction call never runs its action in a transaction that cannot hold its record.
  // The default says the store cannot complete inside a caller's transaction.
  [[nodiscard]] virtual std::string join_problem(const transaction& tx) const;

  // Like complete, but written inside `tx` on the caller's connection: invisible to others until
  // `tx` commits, gone with a rollback (the record then stays in progress under `token`).
  // The default throws configuration_error: only stores that report support override it.
  virtual void complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                                       std::chrono::milliseconds ttl, transaction& tx);

  // A short name for messages, such as "memory_store".
  virtual std::string_view name() const noexcept = 0;

  // True for a store whose operations complete in this process's memory in well under a
  // microsecond (memory_store): idem::metrics counts its calls but does not time its operations,
  // since two clock reads would cost more than the operations themselves.
  virtual bool in_process() const noexcept { return false; }

  // Asynchronous operations (what idem::async_execute and <idem/asio.hpp> call). Each calls its
  // handler exactly once: before it returns when the answer is at hand, or later from a thread of
  // the store (never a thread parked for the call). The handler must not block. The store must
  // outlive every operation it started.
  //
  // try_acquire's: a duplicate's wait is a registration plus a timer, never a blocked thread.
  // When `cancel` (may be null) is requested while the call waits for a holder, the call ends
  // with operation_cancelled and changes nothing stored. Errors are those of try_acquire.
  // The defaults run the blocking operation on a pool of at most 32 threads shared by the process
  // (for idem's stores without asynchronous operations of their own, and yours): a wait then
  // occupies one of those threads, calls beyond 32 at once queue, and a cancelled wait is answered
  // at once while the blocking call finishes in the background (a record it acquires after that is
  // released). A store that overrides them serves any number of waits without a thread each.
  virtual void async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done);
  // complete's and release's, with the same errors.
  virtual void async_complete(const identity& id, const lease_token& token, const payload& value,
                              std::chrono::milliseconds ttl, async_done done);
  virtual void async_release(const identity& id, const lease_token& token, async_done done);

  // join_problem's and complete_in_transaction's, for an asynchronous call given a transaction
  // (engine::async_run). The transaction's connection is the caller's, not the store's: the
  // defaults run the blocking operation on the shared pool's thread for its round trip, while the
  // caller's call is suspended (nothing else may use the transaction meanwhile).
  virtual void async_join_problem(const transaction& tx, async_handler<std::string> done) const;
  virtual void async_complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                                             std::chrono::milliseconds ttl, transaction& tx, async_done done);

  // Administration (idem-admin; <idem/store_admin.hpp>): an operator's view of the records. Rare
  // and unhurried operations, never on a call's path. The defaults throw configuration_error
  // saying the store does not offer them (memory_store: no other process can reach it).
  //
  // True if the four operations below are implemented.
  virtual bool supports_administration() const noexcept { return false; }
  // id's record as stored (ttl passed or not), or nullopt. The payload is read only `with_payload`.
  [[nodiscard]] virtual std::optional<record_summary> inspect_record(const identity& id, bool with_payload);
  // The records `query` selects, oldest (created_at) first, without payloads.
  [[nodiscard]] virtual std::vector<record_summary> list_records(const record_query& query);
  // Deletes id's in-progress record when its lease has lapsed, or whatever its lease when
  // `end_live_lease`; never a complete record (checked in the same atomic step as the delete, so
  // a holder that completes first keeps its record). A holder whose live lease was ended finds it
  // lost: its completion, release and extension are refused by the lease token (lease_lost_error),
  // so of it and a caller that acquires the record afresh only the latter records a result.
  virtual admin_release release_record(const identity& id, bool end_live_lease);
  // How many records the store holds, by state, at the store's clock.
  [[nodiscard]] virtual record_counts count_records();
};

}  // namespace idem
