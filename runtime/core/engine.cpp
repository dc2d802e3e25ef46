// runtime/core/engine.cpp — idem::engine: claim, run, complete or release, and the three
// completion paths (alone, after the caller's commit, inside the caller's transaction).
#include <idem/detail/recycled.hpp>
#include <idem/duration.hpp>
#include <idem/engine.hpp>
#include <idem/policy_registry.hpp>
#include <idem/transaction.hpp>

#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "caught.hpp"
#include "engine_core.hpp"
#include "engine_metrics.hpp"
#include "heartbeat_scheduler.hpp"
#include "periodic_purge.hpp"

namespace idem {

namespace {

std::string describe(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

bool is_lease_lost(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const lease_lost_error&) {
    return true;
  } catch (...) {
    return false;
  }
}

// What a completion that failed after the action's work was done means for the key: the log line
// of log_and_return and of a completion after commit. Two causes, two different truths.
std::string completion_loss(const context& ctx, std::string_view done, std::exception_ptr cause) {
  if (is_lease_lost(cause))
    return fmt::format("action for {} {}, but its lease had expired and another caller took the record over ({}); "
                       "the action may have run twice, and duplicates replay the other caller's result",
                       ctx.id.to_string(), done, describe(cause));
  return fmt::format("action for {} {}, but its completion could not be recorded ({}); the record stays in progress "
                     "until its lease expires, after which a duplicate runs the action again",
                     ctx.id.to_string(), done, describe(cause));
}

}  // namespace

engine::engine(store& backing_store, config settings, engine_hooks hooks) : store_(backing_store) {
  settings.validate();
  if (!hooks.log) hooks.log = stderr_log_sink;
  for (const auto& listener : hooks.listeners)
    if (!listener) throw configuration_error("engine_hooks.listeners must not contain a null listener");
  if (settings.default_completion == completion_mode::join_transaction && !store_.supports_transactional_completion())
    throw configuration_error(fmt::format(
        "config default_completion is join-transaction, but the store ({}) cannot complete inside a caller's "
        "transaction; use a store that can, such as sqlite_store or postgres_store, or set default_completion to "
        "autonomous",
        store_.name()));
  core_ = std::make_shared<detail::engine_core>(store_, settings, std::move(hooks));
  const std::vector<detail::policy_info> policies = detail::registered_policies();
  for (const detail::policy_info& policy : policies) check_policy(policy);
  detail::check_shared_scopes(policies);
  if (settings.purge_interval > std::chrono::milliseconds::zero()) {
    std::weak_ptr<detail::engine_core> core = core_;
    purge_ = std::make_unique<detail::periodic_purge>(
        core_->background_store_, settings.purge_interval, [core](const log_record& record) {
          if (auto alive = core.lock()) alive->log(record.level, record.message);
        });
  }
}

engine::~engine() = default;

const config& engine::settings() const noexcept { return core_->config_; }

detail::raw_outcome engine::run(const context& ctx, detail::function_ref<void()> action,
                                detail::function_ref<payload()> encode) {
  return core_->run(ctx, action, encode);
}

void engine::async_run(context ctx, async_action action, std::function<payload()> encode,
                       cancellation* cancel, async_handler<detail::raw_outcome> done) {
  core_->async_run(std::move(ctx), nullptr, std::move(action), std::move(encode), cancel, std::move(done));
}

void engine::async_run(context ctx, transaction& tx, async_action action, std::function<payload()> encode,
                       cancellation* cancel, async_handler<detail::raw_outcome> done) {
  core_->async_run(std::move(ctx), &tx, std::move(action), std::move(encode), cancel, std::move(done));
}

namespace detail {

namespace {

// The hooks an engine runs with: a metrics_listener first among the listeners when there are
// metrics to report to.
engine_hooks with_metrics_listener(engine_hooks hooks) {
  if (!hooks.metrics) return hooks;
  std::vector<std::shared_ptr<lifecycle_listener>> listeners;
  listeners.reserve(hooks.listeners.size() + 1);
  listeners.push_back(std::make_shared<metrics_listener>(hooks.metrics));
  for (auto& listener : hooks.listeners) listeners.push_back(std::move(listener));
  hooks.listeners = std::move(listeners);
  return hooks;
}

}  // namespace

engine_core::engine_core(store& backing_store, const config& settings, engine_hooks hooks)
    : measured_(hooks.metrics ? std::make_unique<measured_store>(backing_store, hooks.metrics) : nullptr),
      store_(measured_ && !backing_store.in_process() ? *measured_ : backing_store),
      background_store_(measured_ ? *measured_ : backing_store),
      config_(settings),
      hooks_(with_metrics_listener(std::move(hooks))),
      heartbeat_(background_store_, [this](const log_record& record) { log(record.level, record.message); }) {}

void engine_core::log(log_level level, std::string message) const noexcept {
  try {
    hooks_.log(log_record{level, std::move(message)});
  } catch (...) {
    // A log sink that throws must not change what the call does.
  }
}

}  // namespace detail

void engine::check_policy(const detail::policy_info& policy) const {
  const std::string where = fmt::format("{} ({}:{})", policy.function, policy.file, policy.line);
  if (std::string problem = scope_problem(policy.scope); !problem.empty())
    throw configuration_error(fmt::format("invalid scope '{}' on {}: {}", policy.scope, where, problem));
  const call_options& o = policy.options;
  const std::tuple<std::string_view, duration_field, std::optional<std::chrono::milliseconds>> durations[] = {
      {"ttl", duration_field::ttl, o.ttl}, {"lease", duration_field::lease, o.lease},
      {"waitTimeout", duration_field::wait, o.wait}};
  for (const auto& [name, field, value] : durations)
    if (value)
      if (const std::string_view problem = duration_problem(field, *value); !problem.empty())
        throw configuration_error(fmt::format("{} on {} is {}: {}", name, where, format_duration(*value), problem));
  const completion_mode mode = o.completion.value_or(core_->config_.default_completion);
  if (mode == completion_mode::join_transaction && !store_.supports_transactional_completion())
    throw configuration_error(fmt::format(
        "{} asks for completion = \"join-transaction\", but the store ({}) cannot complete inside a caller's "
        "transaction; use a store that can, such as sqlite_store or postgres_store, or drop the argument to complete "
        "autonomously",
        where, store_.name()));
}

namespace {

// make_context's rule for both of its forms: the identity made in place from `identity_args` (a move
// of it would cost every call), the options and their defaults, then validate().
template <class... IdentityArgs>
context make_context_with(const config& defaults, const call_options& options, std::optional<std::string> fingerprint,
                          IdentityArgs&&... identity_args) {
  context ctx{
      .id = identity(std::forward<IdentityArgs>(identity_args)...),
      .ttl = options.ttl.value_or(defaults.default_ttl),
      .lease = options.lease.value_or(defaults.default_lease),
      .wait = options.wait.value_or(defaults.default_wait),
      .completion = options.completion.value_or(defaults.default_completion),
      .fingerprint = std::move(fingerprint),
  };
  ctx.validate();
  return ctx;
}

}  // namespace

context engine::make_context(std::string scope, std::string key, const call_options& options,
                             std::optional<std::string> fingerprint) const {
  return make_context_with(core_->config_, options, std::move(fingerprint), std::move(scope), std::move(key));
}

context engine::make_context(static_scope scope, std::string key, const call_options& options,
                             std::optional<std::string> fingerprint) const {
  return make_context_with(core_->config_, options, std::move(fingerprint), scope, std::move(key));
}

void map_in_flight(const engine& eng, const context& ctx, const in_flight& answer) {
  if (eng.core_->hooks_.map_in_flight) {
    eng.core_->hooks_.map_in_flight(ctx, answer);
    return;
  }
  throw in_flight_error(ctx.id.to_string(), answer.retry_after);
}

// Listeners -----------------------------------------------------------------------------------

namespace detail {

// Calls `call(listener)` on every listener; one that throws is reported and ignored.
template <class Call>
void notify(const engine_hooks& hooks, std::string_view event, const context& ctx, Call&& call) noexcept {
  for (const auto& listener : hooks.listeners) {
    try {
      call(*listener);
    } catch (...) {
      try {
        hooks.log({log_level::warning,
                   fmt::format("lifecycle listener threw from {} for {}; ignoring it: {}", event, ctx.id.to_string(),
                               describe(std::current_exception()))});
      } catch (...) {
      }
    }
  }
}

// The claim ------------------------------------------------------------------------------------

void engine_core::check_join_possible(const context& ctx, transaction* tx, std::string_view where) const {
  if (!store_.supports_transactional_completion())
    throw configuration_error(fmt::format(
        "{} asks for completion_mode::join_transaction, but {} cannot complete inside a caller's transaction; use a "
        "store that can, or completion_mode::autonomous",
        ctx.id.to_string(), store_.name()));
  if (tx == nullptr)
    throw configuration_error(fmt::format(
        "{} asks for completion_mode::join_transaction, but no transaction is active {}; open the "
        "transaction (idem::sqlite_transaction, idem::postgres_transaction or your own idem::transaction) "
        "around the call, or use completion_mode::autonomous",
        ctx.id.to_string(), where));
}

void engine_core::check_join_answer(const context& ctx, const std::string& problem) {
  if (!problem.empty())
    throw configuration_error(fmt::format("{} asks for completion_mode::join_transaction, but the active transaction "
                                          "cannot hold its record: {}",
                                          ctx.id.to_string(), problem));
}

raw_outcome engine_core::run(const context& ctx, function_ref<void()> action, function_ref<payload()> encode) {
  ctx.validate();  // a hand-built context is checked as strictly as make_context's
  transaction* tx = current_transaction();
  if (tx != nullptr && !tx->active()) tx = nullptr;
  if (ctx.completion == completion_mode::join_transaction) {
    check_join_possible(ctx, tx, "on this thread");
    check_join_answer(ctx, store_.join_problem(*tx));
  }

  raw_outcome answer = store_.try_acquire(ctx);  // the one object returned: a replay's payload is not moved
  if (!answered(ctx, answer)) {
    const lease_token token = std::get<acquired>(answer).token;
    answer = tx != nullptr ? run_in_transaction(ctx, token, *tx, action, encode)
                           : run_alone(ctx, token, action, encode);
  }
  return answer;
}

bool engine_core::answered(const context& ctx, acquire_result& claim) {
  if (auto* d = std::get_if<duplicate>(&claim)) {
    notify(hooks_, "on_duplicate", ctx, [&](lifecycle_listener& l) { l.on_duplicate(ctx, d->value, d->completed_at); });
    return true;
  }
  if (auto* f = std::get_if<in_flight>(&claim)) {
    notify(hooks_, "on_in_flight", ctx, [&](lifecycle_listener& l) { l.on_in_flight(ctx, f->retry_after); });
    return true;
  }
  if (auto* m = std::get_if<fingerprint_mismatch>(&claim)) {
    notify(hooks_, "on_fingerprint_mismatch", ctx, [&](lifecycle_listener& l) { l.on_fingerprint_mismatch(ctx); });
    throw fingerprint_mismatch_error(ctx.id.to_string(), std::move(m->stored), std::move(m->received));
  }
  if (const auto& a = std::get<acquired>(claim); a.took_over)
    notify(hooks_, "on_lease_taken_over", ctx, [&](lifecycle_listener& l) { l.on_lease_taken_over(ctx, a.token); });
  return false;
}

heartbeat_scheduler::handle engine_core::begin_held(const context& ctx, const lease_token& token,
                                                   bool on_this_thread) {
  heartbeat_scheduler::handle heartbeat;
  try {
    heartbeat = on_this_thread ? heartbeat_.start_here(ctx.id, token, ctx.lease)
                               : heartbeat_.start(ctx.id, token, ctx.lease);
  } catch (...) {
    release_quietly(ctx, token, "after its heartbeat could not start");
    throw;
  }
  notify(hooks_, "on_acquired", ctx, [&](lifecycle_listener& l) { l.on_acquired(ctx, token); });
  return heartbeat;
}

raw_outcome engine_core::finish(const context& ctx, const lease_token& token, heartbeat_scheduler::handle& heartbeat,
                                const payload& value, std::exception_ptr failure) {
  heartbeat.cancel();
  if (failure) return completion_failed(ctx, token, std::move(failure), false);
  notify(hooks_, "on_completed", ctx, [&](lifecycle_listener& l) { l.on_completed(ctx, token, value); });
  return action_ran;
}

void engine_core::released(const context& ctx, std::exception_ptr error, std::string_view after) const noexcept {
  if (!error) return;
  if (is_lease_lost(error)) {
    log(log_level::debug, fmt::format("lease on {} was taken over before it could be released {}", ctx.id.to_string(),
                                      after));
    return;
  }
  log(log_level::warning, fmt::format("could not release {} {}: {}; it stays in flight until its lease expires",
                                      ctx.id.to_string(), after, describe(error)));
}

void engine_core::release_quietly(const context& ctx, const lease_token& token, std::string_view after) noexcept {
  released(ctx, release_error(ctx, token), after);
}

// The action threw and its record was released (or could not be: `release_failure`, logged), so
// that a retry can succeed.
void engine_core::action_failed(const context& ctx, const lease_token& token, std::exception_ptr cause,
                                std::exception_ptr release_failure) noexcept {
  released(ctx, std::move(release_failure), "after its action failed");
  notify(hooks_, "on_failed", ctx, [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, failure_phase::action); });
}

void engine_core::action_threw(const context& ctx, const lease_token& token) noexcept {
  const std::exception_ptr cause = std::current_exception();
  action_failed(ctx, token, cause, release_error(ctx, token));
}

std::exception_ptr engine_core::release_error(const context& ctx, const lease_token& token) noexcept {
  try {
    store_.release(ctx.id, token);
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

// The work happened but its record could not be written, so the record is not released: it
// stays in progress until its lease expires and a retry steals it.
raw_outcome engine_core::completion_failed(const context& ctx, const lease_token& token, std::exception_ptr cause,
                                           bool always_propagate) {
  notify(hooks_, "on_failed", ctx,
         [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, failure_phase::completion); });
  if (always_propagate || config_.failure_policy == completion_failure_policy::propagate)
    std::rethrow_exception(cause);
  log(log_level::error, completion_loss(ctx, "succeeded", cause));
  return action_ran;
}

// No transaction: run, then complete on the store's own connection.
raw_outcome engine_core::run_alone(const context& ctx, const lease_token& token, function_ref<void()> action,
                                   function_ref<payload()> encode) {
  heartbeat_scheduler::handle heartbeat = begin_held(ctx, token, /*on_this_thread=*/true);
  try {
    action();
  } catch (...) {
    heartbeat.cancel();
    action_threw(ctx, token);
    throw;
  }
  payload value;
  std::exception_ptr failure;
  try {
    value = encode();
    store_.complete(ctx.id, token, value, ctx.ttl);
  } catch (...) {
    failure = std::current_exception();
  }
  return finish(ctx, token, heartbeat, value, std::move(failure));
}

// Under a transaction ---------------------------------------------------------------------------

// The state of one call whose terminal waits for the caller's transaction to end. It lives on the
// heap, shared by the call and the transaction's callbacks, which may run during the action (the
// action commits or rolls back itself) or after execute returned.
class engine_core::transaction_call {
 public:
  enum class stage {
    action,          // the action runs; a transaction end is only recorded
    waiting,         // the action returned; the transaction's end decides the terminal
    release_at_end,  // the action threw and its release could not be made yet: the end makes it
    done,            // the terminal was reported (or the call failed): callbacks do nothing
  };
  enum class ending { none, committed, rolled_back };

  transaction_call(engine_core& e, const context& c, const lease_token& t) : owner(e), ctx(c), token(t) {}

  // Before the commit: the lease must still be ours, or the work must not commit.
  void confirm_lease(transaction& tx) {
    if (current == stage::done) return;
    if (owner.store_.extend_in_transaction(ctx.id, token, ctx.lease, tx)) return;
    lost = true;
    throw lease_lost_error(fmt::format("cannot commit the transaction: the lease on {} expired and another caller took "
                                       "the record over, so its work would be done twice",
                                       ctx.id.to_string()),
                           "commit", ctx.id.to_string());
  }

  void committed() noexcept {
    if (release_deferred()) return;
    if (current == stage::action) {
      ended = ending::committed;
      return;
    }
    if (current != stage::waiting) return;
    current = stage::done;
    if (ctx.completion == completion_mode::join_transaction)
      completed_inside();
    else
      complete_now("committed");
  }

  void rolled_back() noexcept {
    if (release_deferred()) return;
    if (current == stage::action) {
      ended = ending::rolled_back;
      return;
    }
    if (current != stage::waiting) return;
    current = stage::done;
    release_after_rollback();
  }

  // The record was written inside the transaction that has now committed.
  void completed_inside() noexcept {
    heartbeat.cancel();
    notify(owner.hooks_, "on_completed", ctx,
                   [&](lifecycle_listener& l) { l.on_completed(ctx, token, value); });
  }

  // Writes the record on the store's own connection; its work has already committed.
  void complete_now(std::string_view done) noexcept {
    try {
      owner.store_.complete(ctx.id, token, value, ctx.ttl);
      heartbeat.cancel();
      notify(owner.hooks_, "on_completed", ctx,
                     [&](lifecycle_listener& l) { l.on_completed(ctx, token, value); });
    } catch (...) {
      heartbeat.cancel();
      const auto cause = std::current_exception();
      owner.log(log_level::error, completion_loss(ctx, done, cause));
      notify(owner.hooks_, "on_failed", ctx,
                     [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, failure_phase::completion); });
    }
  }

  // Makes the release that release_when_ended() deferred, once: true if there was one.
  bool release_deferred() noexcept {
    if (current != stage::release_at_end) return false;
    current = stage::done;
    owner.release_quietly(ctx, token, "after its action failed and its transaction ended");
    return true;
  }

  void release_after_rollback() noexcept {
    heartbeat.cancel();
    owner.release_quietly(ctx, token, "after its transaction rolled back");
    // A commit refused because the lease was lost is a failed completion; any other end a rollback.
    const auto cause = lost ? std::make_exception_ptr(lease_lost_error(fmt::format(
                                  "the lease on {} was lost before its transaction committed", ctx.id.to_string())))
                            : std::make_exception_ptr(rollback_error(ctx.id.to_string()));
    const failure_phase phase = lost ? failure_phase::completion : failure_phase::rollback;
    notify(owner.hooks_, "on_failed", ctx,
                   [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, phase); });
  }

  engine_core& owner;
  const context ctx;
  const lease_token token;
  payload value;
  heartbeat_scheduler::handle heartbeat;
  stage current = stage::action;
  ending ended = ending::none;
  bool lost = false;
};

std::shared_ptr<engine_core::transaction_call> engine_core::enter_transaction(const context& ctx,
                                                                              const lease_token& token,
                                                                              transaction& tx) {
  // Everything the transaction's end needs is registered before the action runs, so that an end
  // inside the action is seen, and a failure to register releases the key at once.
  std::shared_ptr<transaction_call> call;
  try {
    call = std::make_shared<transaction_call>(*this, ctx, token);
    call->heartbeat = heartbeat_.start(call->ctx.id, token, ctx.lease);
    tx.after_rollback([call] { call->rolled_back(); });
    tx.after_commit([call] { call->committed(); });
    if (ctx.completion == completion_mode::autonomous)
      tx.before_commit([call, &tx] { call->confirm_lease(tx); });
  } catch (...) {
    if (call) abandon(*call);
    release_quietly(ctx, token, "after it could not take part in the caller's transaction");
    throw;
  }
  notify(hooks_, "on_acquired", ctx, [&](lifecycle_listener& l) { l.on_acquired(ctx, token); });
  return call;
}

void engine_core::abandon(transaction_call& call) noexcept {
  call.current = transaction_call::stage::done;
  call.heartbeat.cancel();
}

std::exception_ptr engine_core::release_when_ended(transaction_call& call, const transaction& tx,
                                                   std::exception_ptr failure) noexcept {
  if (!failure || is_lease_lost(failure) || !tx.active()) return failure;
  call.owner.log(log_level::debug, fmt::format("{} is released when its transaction ends: {}", call.ctx.id.to_string(),
                                               describe(failure)));
  call.current = transaction_call::stage::release_at_end;
  return nullptr;
}

std::optional<raw_outcome> engine_core::action_returned(transaction_call& call, std::exception_ptr encode_failure) {
  const context& ctx = call.ctx;
  if (encode_failure) {
    abandon(call);
    return completion_failed(ctx, call.token, std::move(encode_failure),
                             ctx.completion == completion_mode::join_transaction);
  }
  // The action ended the transaction itself.
  if (call.ended == transaction_call::ending::rolled_back) {
    call.current = transaction_call::stage::done;
    call.release_after_rollback();
    return action_ran;
  }
  if (call.ended == transaction_call::ending::committed) {
    call.current = transaction_call::stage::done;
    if (ctx.completion == completion_mode::join_transaction)
      log(log_level::warning, fmt::format("the transaction of {} committed inside its action, so its record is written "
                                          "after the commit instead of inside it",
                                          ctx.id.to_string()));
    call.complete_now("committed");
    return action_ran;
  }
  if (ctx.completion == completion_mode::join_transaction) return std::nullopt;
  call.current = transaction_call::stage::waiting;
  return action_ran;
}

raw_outcome engine_core::completed_inside(const std::shared_ptr<transaction_call>& call, transaction& tx,
                                          std::exception_ptr failure) {
  if (failure) {
    // The terminal is this failure; a later rollback only frees the key (the record stays in
    // progress under our token after it).
    abandon(*call);
    try {
      tx.after_rollback([this, call] { release_quietly(call->ctx, call->token, "after its transaction rolled back"); });
    } catch (...) {
      // Without the callback the record stays in progress until its lease expires.
    }
    return completion_failed(call->ctx, call->token, std::move(failure), true);
  }
  call->current = transaction_call::stage::waiting;
  return action_ran;
}

raw_outcome engine_core::run_in_transaction(const context& ctx, const lease_token& token, transaction& tx,
                                            function_ref<void()> action, function_ref<payload()> encode) {
  const std::shared_ptr<transaction_call> call = enter_transaction(ctx, token, tx);
  try {
    action();
  } catch (...) {
    abandon(*call);
    const std::exception_ptr cause = std::current_exception();
    action_failed(ctx, token, cause, release_when_ended(*call, tx, release_error(ctx, token)));
    throw;
  }
  std::exception_ptr encode_failure;
  try {
    call->value = encode();
  } catch (...) {
    encode_failure = std::current_exception();
  }
  if (std::optional<raw_outcome> terminal = action_returned(*call, std::move(encode_failure))) return *terminal;
  std::exception_ptr failure;
  try {
    store_.complete_in_transaction(ctx.id, token, call->value, ctx.ttl, tx);
  } catch (...) {
    failure = std::current_exception();
  }
  return completed_inside(call, tx, std::move(failure));
}

// Asynchronously ------------------------------------------------------------------------------

// Errors are caught with detail::caught (caught.hpp), so that they are handed on only after their
// catch block has ended.
//
// One asynchronous call: the steps of run_alone, or of run_in_transaction when it is given a
// transaction, each started by the end of the one before, so they never run at the same time.
// Owns what it uses, the engine's core included.
struct async_call : std::enable_shared_from_this<async_call> {
  // Takes the handlers by rvalue reference, so that each is moved only as its member is made, and
  // `done` is the last member made: when making the call throws, `d` is still the caller's to
  // report that with.
  async_call(std::shared_ptr<engine_core> c, context&& x, transaction* t, async_action&& a,
             std::function<payload()>&& e, async_handler<raw_outcome>&& d)
      : core(std::move(c)), ctx(std::move(x)), tx(t), action(std::move(a)), encode(std::move(e)), done(std::move(d)) {}

  void fail(std::exception_ptr error) { done(std::move(error), raw_outcome{in_flight{}}); }

  void claim(cancellation* cancel) {
    core->store_.async_try_acquire(ctx, cancel, [self = shared_from_this()](std::exception_ptr error,
                                                                           acquire_result claim) {
      self->claimed(std::move(error), std::move(claim));
    });
  }

  void claimed(std::exception_ptr error, acquire_result claim) {
    if (error) return fail(std::move(error));
    bool answered = false;
    if (std::exception_ptr refused = caught([&] {
          answered = core->answered(ctx, claim);
          if (answered) return;
          token = std::get<acquired>(claim).token;
          if (tx != nullptr) {
            in_tx = core->enter_transaction(ctx, token, *tx);
          } else {
            heartbeat = core->begin_held(ctx, token, /*on_this_thread=*/false);
          }
        }))
      return fail(std::move(refused));
    if (answered) return done(nullptr, std::move(claim));
    action([self = shared_from_this()](std::exception_ptr failure) { self->action_ended(std::move(failure)); });
  }

  void action_ended(std::exception_ptr cause) {
    if (cause) {
      if (in_tx) {
        engine_core::abandon(*in_tx);
      } else {
        heartbeat.cancel();
      }
      core->store_.async_release(ctx.id, token, [self = shared_from_this(), cause](std::exception_ptr release_failure) mutable {
        if (self->in_tx) release_failure = engine_core::release_when_ended(*self->in_tx, *self->tx, std::move(release_failure));
        self->core->action_failed(self->ctx, self->token, cause, std::move(release_failure));
        self->fail(std::move(cause));
      });
      return;
    }
    std::exception_ptr encode_failure = caught([&] { value = encode(); });
    if (in_tx) return returned_in_transaction(std::move(encode_failure));
    if (encode_failure) return completed(std::move(encode_failure));
    core->store_.async_complete(ctx.id, token, value, ctx.ttl,
                                [self = shared_from_this()](std::exception_ptr failure) { self->completed(failure); });
  }

  void completed(std::exception_ptr failure) {
    raw_outcome result;
    if (std::exception_ptr error =
            caught([&] { result = core->finish(ctx, token, heartbeat, value, std::move(failure)); }))
      return fail(std::move(error));
    done(nullptr, std::move(result));
  }

  void returned_in_transaction(std::exception_ptr encode_failure) {
    std::optional<raw_outcome> terminal;
    if (std::exception_ptr error = caught([&] {
          in_tx->value = value;
          terminal = core->action_returned(*in_tx, std::move(encode_failure));
        }))
      return fail(std::move(error));
    if (terminal) return done(nullptr, std::move(*terminal));
    core->store_.async_complete_in_transaction(
        ctx.id, token, in_tx->value, ctx.ttl, *tx,
        [self = shared_from_this()](std::exception_ptr failure) { self->completed_inside(std::move(failure)); });
  }

  void completed_inside(std::exception_ptr failure) {
    raw_outcome result;
    if (std::exception_ptr error = caught([&] { result = core->completed_inside(in_tx, *tx, std::move(failure)); }))
      return fail(std::move(error));
    done(nullptr, std::move(result));
  }

  const std::shared_ptr<engine_core> core;
  const context ctx;
  transaction* const tx;  // null: outside a transaction
  const async_action action;
  const std::function<payload()> encode;
  lease_token token;
  heartbeat_scheduler::handle heartbeat;             // outside a transaction
  std::shared_ptr<engine_core::transaction_call> in_tx;  // inside one
  payload value;
  const async_handler<raw_outcome> done;  // made last: see the constructor
};

void engine_core::async_run(context ctx, transaction* tx, async_action action, std::function<payload()> encode,
                            cancellation* cancel, async_handler<raw_outcome> done) {
  const completion_mode completion = ctx.completion;  // ctx moves into the call
  std::shared_ptr<async_call> call;
  if (std::exception_ptr refused = caught([&] {
        ctx.validate();
        if (tx != nullptr && !tx->active()) tx = nullptr;
        if (ctx.completion == completion_mode::join_transaction)
          check_join_possible(ctx, tx, "for this asynchronous call (give it the transaction: engine::async_run, "
                                       "idem::async_execute(engine, ctx, tx, ...))");
        call = std::allocate_shared<async_call>(recycling_allocator<async_call>(), shared_from_this(), std::move(ctx),
                                                tx, std::move(action), std::move(encode), std::move(done));
      }))
    return done(std::move(refused), raw_outcome{in_flight{}});
  if (completion != completion_mode::join_transaction) return call->claim(cancel);
  // The store's answer about the transaction comes before anything is acquired.
  store_.async_join_problem(*tx, [call, cancel](std::exception_ptr error, std::string problem) {
    std::exception_ptr refusal = std::move(error);
    if (!refusal) refusal = caught([&] { check_join_answer(call->ctx, problem); });
    if (refusal) return call->fail(std::move(refusal));
    call->claim(cancel);
  });
}

}  // namespace detail
}  // namespace idem
