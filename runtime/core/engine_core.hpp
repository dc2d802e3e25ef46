// runtime/core/engine_core.hpp — what an engine's calls use: the store, the configuration, the
// hooks and the heartbeat. Shared, so that an asynchronous call still running when its engine
// object is destroyed keeps what it uses until it ends.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <idem/engine.hpp>
#include <idem/transaction.hpp>

#include "heartbeat_scheduler.hpp"

namespace idem::detail {

class engine_core : public std::enable_shared_from_this<engine_core> {
 public:
  engine_core(store& backing_store, const config& settings, engine_hooks hooks);

  // engine::execute's call, type-erased; see engine.hpp.
  raw_outcome run(const context& ctx, function_ref<void()> action, function_ref<payload()> encode);
  // engine::run_at_once; see engine.hpp.
  std::optional<raw_outcome> run_at_once(const context& ctx, function_ref<void()> action,
                                         function_ref<payload()> encode);
  // engine::async_run's calls (`tx` null: outside a transaction); see engine.hpp.
  void async_run(context ctx, transaction* tx, async_action action, std::function<payload()> encode,
                 cancellation* cancel, async_handler<raw_outcome> done);

  // Hands `message` to the log sink; a sink that throws is ignored.
  void log(log_level level, std::string message) const noexcept;

  // Set when the hooks carry metrics: the backing store, reporting to them.
  const std::unique_ptr<store> measured_;
  // What the calls use: measured_, or the backing store when there are no metrics or the store
  // is in_process() (measured_ would only forward, one more indirect call per operation).
  store& store_;
  // What the heartbeat and the scheduled purge use: measured_ whenever there are metrics.
  store& background_store_;
  const config config_;
  const engine_hooks hooks_;
  heartbeat_stripes heartbeat_;

 private:
  friend struct async_call;
  class transaction_call;  // the state of a call whose record waits for a transaction to end

  // Whether the claim is the call's answer: true for a duplicate or in flight (listeners
  // notified; the claim is then the raw_outcome, as it stands); throws fingerprint_mismatch_error,
  // moving the two fingerprints out of the claim (hence not const). False for an acquired record,
  // after telling the listeners of a lease taken over.
  bool answered(const context& ctx, acquire_result& claim);
  // The record is held: starts its heartbeat and notifies on_acquired. Releases and rethrows
  // when the heartbeat cannot start. `on_this_thread`: the handle ends on this thread, nested
  // calls' before it (a synchronous call), so the heartbeat registers without a lock.
  heartbeat_scheduler::handle begin_held(const context& ctx, const lease_token& token, bool on_this_thread);
  // The completion was attempted (`failure` null when it succeeded): stops the heartbeat, then
  // reports the terminal. Follows the completion-failure policy: may throw.
  raw_outcome finish(const context& ctx, const lease_token& token, heartbeat_scheduler::handle& heartbeat,
                     const payload& value, std::exception_ptr failure);

  raw_outcome run_alone(const context& ctx, const lease_token& token, function_ref<void()> action,
                        function_ref<payload()> encode);
  raw_outcome run_in_transaction(const context& ctx, const lease_token& token, transaction& tx,
                                 function_ref<void()> action, function_ref<payload()> encode);
  // The steps of run_in_transaction, which the asynchronous call takes too. The record is held:
  // registers the call's end with `tx`, starts the heartbeat, notifies on_acquired (releases and
  // rethrows when that fails).
  std::shared_ptr<transaction_call> enter_transaction(const context& ctx, const lease_token& token, transaction& tx);
  // The action threw: the call ends here (its record is to be released).
  static void abandon(transaction_call& call) noexcept;
  // The abandoned call's release failed with `failure` while `tx` is still active, as a store
  // that cannot write beside the caller's transaction does (SQLite, once the transaction wrote:
  // it holds the file's write lock): the release is made again when `tx` ends, either way.
  // Returns the failure left to report: null once the release is deferred.
  static std::exception_ptr release_when_ended(transaction_call& call, const transaction& tx,
                                               std::exception_ptr failure) noexcept;
  // The abandoned call's record is released when its transaction ends, without trying now.
  static void release_at_end(transaction_call& call) noexcept;
  // The action returned, and its value was encoded into the call (or `encode_failure`): the
  // terminal if it is decided now, or nothing when the record is to be written inside the
  // transaction next. May throw (the completion-failure policy).
  std::optional<raw_outcome> action_returned(transaction_call& call, std::exception_ptr encode_failure);
  // The record was written inside `tx` (`failure` null) or could not be. May throw.
  raw_outcome completed_inside(const std::shared_ptr<transaction_call>& call, transaction& tx,
                               std::exception_ptr failure);
  // Why a join-transaction call cannot run (before the store is asked about `tx`): throws
  // configuration_error. `where` says where the transaction was looked for.
  void check_join_possible(const context& ctx, transaction* tx, std::string_view where) const;
  // The store's answer about `tx` (empty: it can join): throws configuration_error otherwise.
  static void check_join_answer(const context& ctx, const std::string& problem);
  // The action failed with `cause` and its record was released (`release_failure` if that failed).
  void action_failed(const context& ctx, const lease_token& token, std::exception_ptr cause,
                     std::exception_ptr release_failure) noexcept;
  // In a catch block: releases the record the action held (on this thread), then action_failed().
  void action_threw(const context& ctx, const lease_token& token) noexcept;
  raw_outcome completion_failed(const context& ctx, const lease_token& token, std::exception_ptr cause,
                                bool always_propagate);
  // Releases on the calling thread; a failure is logged (see released()).
  void release_quietly(const context& ctx, const lease_token& token, std::string_view after) noexcept;
  // Releases on the calling thread and returns what that threw (null: released).
  std::exception_ptr release_error(const context& ctx, const lease_token& token) noexcept;
  // What a release that failed with `error` (null: it succeeded) means, logged.
  void released(const context& ctx, std::exception_ptr error, std::string_view after) const noexcept;
};

}  // namespace idem::detail
