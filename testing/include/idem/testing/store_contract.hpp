// idem/testing/store_contract.hpp — the store contract, written once, instantiated per store.
//
// A store's test executable links idem::testing (the contract cases and a Catch2 main; in this
// repository idem_testing) and defines make_store(); a store that supports transactional
// completion also links idem::testing_transactional and defines make_transactional_harness().
// Every case uses keys unique to the run, so one backend may serve all cases.
// docs/stores/writing-a-store.md walks through it.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <source_location>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <idem/context.hpp>
#include <idem/identity.hpp>
#include <idem/lease_token.hpp>
#include <idem/payload.hpp>
#include <idem/store.hpp>
#include <idem/transaction.hpp>

namespace idem::contract {

// Defined by each store's test executable: a store for one test case. Called once per case.
std::unique_ptr<idem::store> make_store();

// A transaction on the connection the transactional store completes on.
class contract_transaction {
 public:
  virtual ~contract_transaction() = default;
  // The transaction handed to store::complete_in_transaction.
  virtual idem::transaction& get() = 0;
  virtual void commit() = 0;
  virtual void rollback() = 0;
};

// A transactional store plus a way to open a transaction it can join.
class transactional_harness {
 public:
  virtual ~transactional_harness() = default;
  virtual idem::store& store() = 0;
  // Opens a transaction; destroying an unfinished one rolls it back.
  virtual std::unique_ptr<contract_transaction> begin() = 0;
};

// Defined by the test executable of each store that supports transactional completion.
std::unique_ptr<transactional_harness> make_transactional_harness();

// A key no other test case (or run) uses: `hint` plus random hex.
std::string unique_key(std::string_view hint);

// ---------------------------------------------------------------------------------------------
// Everything below is shared by the contract cases and by store-specific tests. The functions
// are defined in contract_support.cpp; the require_* ones check with Catch2 assertions, so call
// them on the test's own thread only (Catch2 v2 assertions are not thread-safe).

// Fixtures, as in idempotency4j's contract.
inline constexpr std::string_view contract_scope = "ContractScope.action";
inline constexpr std::string_view other_scope = "OtherScope.action";
inline constexpr std::string_view transactional_scope = "TransactionalContractScope.action";
inline constexpr std::string_view sample_type = "test/sample";

// A fresh identity in `scope` whose key comes from unique_key(hint).
idem::identity fresh_identity(std::string_view hint, std::string_view scope = contract_scope);

// Type "test/sample", body `body` (default "hello"), attributes {status=200, requestId=abc-123}.
idem::payload sample_payload(std::string body = "hello");

// A request fingerprint of 64 `digit`s: fingerprint('0'), fingerprint('a'), fingerprint('b').
std::string fingerprint(char digit);

// Whether every store make_store() hands out is seen by the current case alone (a fresh
// memory_store, a new SQLite file). Then purge_expired() counts only the case's own records and
// the contract checks purge counts exactly; otherwise (the default: cases may share one backend
// and run in parallel) it checks them as lower bounds and relies on observable behaviour. A
// test executable declares exclusivity once, e.g. from its make_store().
void set_backend_exclusive(bool exclusive) noexcept;
bool backend_is_exclusive() noexcept;

// Whether the backend itself forgets a complete record when its ttl ends (Redis: the record's
// native expiry is its ttl). Then purge_expired() finds no such record left to count, and the
// contract checks that the record is gone instead. Off by default; declare it once, like
// exclusivity.
void set_backend_expires_complete_records(bool expires) noexcept;
bool backend_expires_complete_records() noexcept;

// A readable account of an acquire_result for failure messages.
std::string describe(const idem::acquire_result& result);

// Each requires `result` to hold the named alternative (failing the case otherwise, with the
// caller's line) and returns it.
idem::lease_token require_acquired(const idem::acquire_result& result,
                                   std::source_location where = std::source_location::current());
idem::duplicate require_duplicate(const idem::acquire_result& result,
                                  std::source_location where = std::source_location::current());
idem::in_flight require_in_flight(const idem::acquire_result& result,
                                  std::source_location where = std::source_location::current());
idem::fingerprint_mismatch require_mismatch(const idem::acquire_result& result,
                                            std::source_location where = std::source_location::current());

// Requires `mutation` to throw idem::lease_lost_error whose message names `operation` (such as
// "complete") and id.to_string() and does not contain the raw key. Returns the message.
std::string require_lease_lost(std::string_view operation, const idem::identity& id,
                               const std::function<void()>& mutation,
                               std::source_location where = std::source_location::current());

// Waits until store.waiting() == n, at most `bound`, and fails the case if it never is. Call it
// before letting a holder finish, so that a caller started on another thread is known to wait
// inside try_acquire (and, in a store that waits on an event, to be subscribed to it).
void require_waiting(const idem::store& store, std::size_t n,
                     std::chrono::milliseconds bound = std::chrono::seconds(10),
                     std::source_location where = std::source_location::current());

// Milliseconds elapsed on the steady clock since construction.
class stopwatch {
 public:
  std::chrono::milliseconds elapsed() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start_);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// background<T>
//
// Runs `task` on its own std::jthread and keeps what it returns (or throws) for result(). The
// thread is joined when the object is destroyed, also when a failed assertion unwinds the case.
// Not copyable, not movable.
template <class T>
class background {
 public:
  template <class F>
  explicit background(F task)
      : thread_([this, task = std::move(task)]() mutable {
          try {
            promise_.set_value(task());
          } catch (...) {
            promise_.set_exception(std::current_exception());
          }
        }) {}
  background(const background&) = delete;
  background& operator=(const background&) = delete;

  // Whether the task finished within `timeout`.
  bool finished_within(std::chrono::milliseconds timeout) const {
    return future_.wait_for(timeout) == std::future_status::ready;
  }
  // Waits for the task and returns its value, or rethrows what it threw. Call once.
  T result() { return future_.get(); }

 private:
  std::promise<T> promise_;
  std::future<T> future_ = promise_.get_future();
  std::jthread thread_;  // declared last: destroyed (joined) first
};

}  // namespace idem::contract
