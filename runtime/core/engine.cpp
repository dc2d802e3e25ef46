#include <idem/engine.hpp>
#include <idem/policy_registry.hpp>
#include <idem/transaction.hpp>

#include <fmt/format.h>

#include "heartbeat_scheduler.hpp"

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

}  // namespace

engine::engine(store& backing_store, config settings, engine_hooks hooks)
    : store_(backing_store), config_(settings), hooks_(std::move(hooks)) {
  config_.validate();
  if (!hooks_.log) hooks_.log = stderr_log_sink;
  for (const auto& listener : hooks_.listeners)
    if (!listener) throw configuration_error("engine_hooks.listeners must not contain a null listener");
  if (config_.default_completion == completion_mode::join_transaction && !store_.supports_transactional_completion())
    throw configuration_error(fmt::format(
        "config default_completion is join-transaction, but the store ({}) cannot complete inside a caller's "
        "transaction; use a store that can, such as sqlite_store or postgres_store, or set default_completion to "
        "autonomous",
        store_.name()));
  const std::vector<detail::policy_info> policies = detail::registered_policies();
  for (const detail::policy_info& policy : policies) check_policy(policy);
  detail::check_shared_scopes(policies);
  heartbeat_ = std::make_unique<detail::heartbeat_scheduler>(store_);
}

engine::~engine() = default;

void engine::check_policy(const detail::policy_info& policy) const {
  const std::string where = fmt::format("{} ({}:{})", policy.function, policy.file, policy.line);
  if (std::string problem = scope_problem(policy.scope); !problem.empty())
    throw configuration_error(fmt::format("invalid scope '{}' on {}: {}", policy.scope, where, problem));
  const call_options& o = policy.options;
  if (o.ttl && *o.ttl < min_ttl)
    throw configuration_error(fmt::format("ttl on {} must be at least 1 ms", where));
  if (o.lease && *o.lease < min_lease)
    throw configuration_error(fmt::format("lease on {} must be at least 2 ms", where));
  if (o.wait && *o.wait < std::chrono::milliseconds::zero())
    throw configuration_error(fmt::format("waitTimeout on {} must not be negative", where));
  const completion_mode mode = o.completion.value_or(config_.default_completion);
  if (mode == completion_mode::join_transaction && !store_.supports_transactional_completion())
    throw configuration_error(fmt::format(
        "{} asks for completion = \"join-transaction\", but the store ({}) cannot complete inside a caller's "
        "transaction; use a store that can, such as sqlite_store or postgres_store, or drop the argument to complete "
        "autonomously",
        where, store_.name()));
}

context engine::make_context(std::string scope, std::string key, const call_options& options,
                             std::optional<std::string> fingerprint) const {
  context ctx{
      .id = identity(std::move(scope), std::move(key)),
      .ttl = options.ttl.value_or(config_.default_ttl),
      .lease = options.lease.value_or(config_.default_lease),
      .wait = options.wait.value_or(config_.default_wait),
      .completion = options.completion.value_or(config_.default_completion),
      .fingerprint = std::move(fingerprint),
  };
  ctx.validate();
  return ctx;
}

void engine::map_in_flight(const context& ctx, const in_flight& answer) const {
  if (hooks_.map_in_flight) {
    hooks_.map_in_flight(ctx, answer);
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

// The state of an acquisition whose terminal waits for the caller's transaction to end.
struct deferred_completion {
  deferred_completion(const context& c, const lease_token& t) : ctx(c), token(t) {}
  context ctx;
  lease_token token;
  payload value;
  heartbeat_scheduler::handle heartbeat;
};

}  // namespace detail

// The core -----------------------------------------------------------------------------------

detail::raw_outcome engine::run(const context& ctx, detail::function_ref<void()> action,
                                detail::function_ref<payload()> encode) {
  using detail::notify;
  transaction* tx = current_transaction();
  if (tx != nullptr && !tx->active()) tx = nullptr;

  if (ctx.completion == completion_mode::join_transaction) {
    if (!store_.supports_transactional_completion())
      throw configuration_error(fmt::format(
          "{} asks for completion_mode::join_transaction, but {} cannot complete inside a caller's transaction; use a "
          "store that can, or completion_mode::autonomous",
          ctx.id.to_string(), store_.name()));
    if (tx == nullptr)
      throw configuration_error(fmt::format(
          "{} asks for completion_mode::join_transaction, but no transaction is active on this thread; open the "
          "transaction (idem::sqlite_transaction, idem::postgres_transaction or your own idem::transaction) "
          "around the call, or use completion_mode::autonomous",
          ctx.id.to_string()));
  }

  acquire_result claim = store_.try_acquire(ctx);
  if (auto* d = std::get_if<duplicate>(&claim)) {
    notify(hooks_, "on_duplicate", ctx, [&](lifecycle_listener& l) { l.on_duplicate(ctx, d->value, d->completed_at); });
    return std::move(*d);
  }
  if (auto* f = std::get_if<in_flight>(&claim)) {
    notify(hooks_, "on_in_flight", ctx, [&](lifecycle_listener& l) { l.on_in_flight(ctx, f->retry_after); });
    return *f;
  }
  if (auto* m = std::get_if<fingerprint_mismatch>(&claim))
    throw fingerprint_mismatch_error(ctx.id.to_string(), std::move(m->stored), std::move(m->received));
  const lease_token token = std::get<acquired>(claim).token;

  // Under a transaction the terminal callbacks outlive this call, so the state moves to the heap.
  std::shared_ptr<detail::deferred_completion> deferred;
  detail::heartbeat_scheduler::handle heartbeat;
  if (tx != nullptr) {
    deferred = std::make_shared<detail::deferred_completion>(ctx, token);
    deferred->heartbeat = heartbeat_->start(deferred->ctx.id, token, ctx.lease);
  } else {
    heartbeat = heartbeat_->start(ctx.id, token, ctx.lease);
  }
  auto stop_heartbeat = [&] {
    if (deferred)
      deferred->heartbeat.cancel();
    else
      heartbeat.cancel();
  };

  notify(hooks_, "on_acquired", ctx, [&](lifecycle_listener& l) { l.on_acquired(ctx, token); });

  try {
    action();
  } catch (...) {
    stop_heartbeat();
    try {
      store_.release(ctx.id, token);
    } catch (...) {
      hooks_.log({log_level::warning, fmt::format("could not release {} after its action failed: {}; it stays in "
                                                  "flight until its lease expires",
                                                  ctx.id.to_string(), describe(std::current_exception()))});
    }
    const auto cause = std::current_exception();
    notify(hooks_, "on_failed", ctx,
           [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, failure_phase::action); });
    throw;
  }

  // A failed completion: the work happened, so the record is not released; it stays in progress
  // until its lease expires and a retry steals it.
  auto completion_failed = [&](std::exception_ptr cause, bool always_propagate) -> detail::raw_outcome {
    stop_heartbeat();
    notify(hooks_, "on_failed", ctx,
           [&](lifecycle_listener& l) { l.on_failed(ctx, token, cause, failure_phase::completion); });
    if (always_propagate || config_.failure_policy == completion_failure_policy::propagate)
      std::rethrow_exception(cause);
    hooks_.log({log_level::error,
                fmt::format("action for {} succeeded but its completion could not be recorded ({}); a later duplicate "
                            "will run it again",
                            ctx.id.to_string(), describe(cause))});
    return detail::ran{};
  };

  if (tx == nullptr) {
    try {
      payload value = encode();
      store_.complete(ctx.id, token, value, ctx.ttl);
      heartbeat.cancel();
      notify(hooks_, "on_completed", ctx, [&](lifecycle_listener& l) { l.on_completed(ctx, token, value); });
    } catch (...) {
      return completion_failed(std::current_exception(), false);
    }
    return detail::ran{};
  }

  // Under an active transaction: the terminal callback waits for its end.
  try {
    deferred->value = encode();
  } catch (...) {
    return completion_failed(std::current_exception(), ctx.completion == completion_mode::join_transaction);
  }

  auto on_rollback = [this, deferred] {
    deferred->heartbeat.cancel();
    const context& c = deferred->ctx;
    try {
      store_.release(c.id, deferred->token);
    } catch (const lease_lost_error&) {
      hooks_.log({log_level::debug, fmt::format("lease on {} was taken over before its transaction rolled back",
                                                c.id.to_string())});
    } catch (...) {
      hooks_.log({log_level::warning, fmt::format("could not release {} after its transaction rolled back: {}; it "
                                                  "stays in flight until its lease expires",
                                                  c.id.to_string(), describe(std::current_exception()))});
    }
    const auto cause = std::make_exception_ptr(rollback_error(c.id.to_string()));
    detail::notify(hooks_, "on_failed", c, [&](lifecycle_listener& l) {
      l.on_failed(c, deferred->token, cause, failure_phase::rollback);
    });
  };

  if (ctx.completion == completion_mode::join_transaction) {
    try {
      store_.complete_in_transaction(ctx.id, token, deferred->value, ctx.ttl, *tx);
    } catch (...) {
      const auto cause = std::current_exception();
      // The terminal is this failure; a later rollback only frees the key.
      tx->after_rollback([this, deferred] {
        try {
          store_.release(deferred->ctx.id, deferred->token);
        } catch (...) {
          hooks_.log({log_level::debug, fmt::format("could not release {} after its transaction rolled back",
                                                    deferred->ctx.id.to_string())});
        }
      });
      return completion_failed(cause, true);
    }
    tx->after_commit([this, deferred] {
      deferred->heartbeat.cancel();
      const context& c = deferred->ctx;
      detail::notify(hooks_, "on_completed", c,
                     [&](lifecycle_listener& l) { l.on_completed(c, deferred->token, deferred->value); });
    });
    tx->after_rollback(on_rollback);
    return detail::ran{};
  }

  // Autonomous under a transaction: written on the store's own connection once the caller commits.
  tx->after_commit([this, deferred] {
    const context& c = deferred->ctx;
    try {
      store_.complete(c.id, deferred->token, deferred->value, c.ttl);
      deferred->heartbeat.cancel();
      detail::notify(hooks_, "on_completed", c,
                     [&](lifecycle_listener& l) { l.on_completed(c, deferred->token, deferred->value); });
    } catch (...) {
      deferred->heartbeat.cancel();
      const auto cause = std::current_exception();
      hooks_.log({log_level::error, fmt::format("action for {} committed but its completion could not be recorded "
                                                "({}); a later duplicate will run it again",
                                                c.id.to_string(), describe(cause))});
      detail::notify(hooks_, "on_failed", c, [&](lifecycle_listener& l) {
        l.on_failed(c, deferred->token, cause, failure_phase::completion);
      });
    }
  });
  tx->after_rollback(on_rollback);
  return detail::ran{};
}

}  // namespace idem
