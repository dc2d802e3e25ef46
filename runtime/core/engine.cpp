// runtime/core/engine.cpp — idem::engine: its checks at construction (configuration, listeners,
// every registered policy), the contexts it makes and its shared core. The calls' steps are in
// engine_call.cpp (the claim, a call alone), transaction_call.cpp (a call under the caller's
// transaction) and async_call.cpp (the same steps, each started by the end of the one before).
#include <idem/duration.hpp>
#include <idem/engine.hpp>
#include <idem/policy_registry.hpp>

#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "engine_core.hpp"
#include "engine_metrics.hpp"
#include "periodic_purge.hpp"

namespace idem {

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

raw_outcome engine::run(const context& ctx, function_ref<void()> action, function_ref<payload()> encode) {
  return core_->run(ctx, action, encode);
}

std::optional<raw_outcome> engine::run_at_once(const context& ctx, function_ref<void()> action,
                                               function_ref<payload()> encode) {
  return core_->run_at_once(ctx, action, encode);
}

void engine::async_run(context ctx, async_action action, std::function<payload()> encode,
                       cancellation* cancel, async_handler<raw_outcome> done) {
  core_->async_run(std::move(ctx), nullptr, std::move(action), std::move(encode), cancel, std::move(done));
}

void engine::async_run(context ctx, transaction& tx, async_action action, std::function<payload()> encode,
                       cancellation* cancel, async_handler<raw_outcome> done) {
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

}  // namespace idem
