// runtime/core/store.cpp — the defaults of idem::store's optional operations.
#include <idem/errors.hpp>
#include <idem/store.hpp>

#include <atomic>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "blocking_pool.hpp"
#include "waiting_call.hpp"

namespace idem {

void store::complete_in_transaction(const identity& id, const lease_token&, const payload&, std::chrono::milliseconds,
                                    transaction&) {
  throw configuration_error(fmt::format("{} cannot complete {} inside a caller's transaction; use a store that can, "
                                        "such as sqlite_store or postgres_store, or use completion_mode::autonomous",
                                        name(), id.to_string()));
}

bool store::extend_in_transaction(const identity& id, const lease_token& token, std::chrono::milliseconds lease,
                                  transaction&) {
  return extend(id, token, lease);
}

std::string store::join_problem(const transaction&) const {
  return fmt::format("{} cannot complete inside a caller's transaction; use a store that can, such as sqlite_store or "
                     "postgres_store, or completion_mode::autonomous",
                     name());
}

std::optional<acquire_result> store::try_acquire_at_once(const context&) { return std::nullopt; }

// The default asynchronous operations: the blocking ones, on the shared pool. The store object
// outlives the operation (the interface's rule), so the tasks capture `this`.

void store::async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) {
  // Whoever flips `answered` first calls the handler: the blocking call, or a cancellation request.
  struct call_state {
    call_state(const context& c, async_handler<acquire_result> d) : ctx(c), done(std::move(d)) {}
    const context ctx;
    const async_handler<acquire_result> done;
    std::atomic<bool> answered{false};
  };
  auto state = std::make_shared<call_state>(ctx, std::move(done));
  if (cancel != nullptr && ctx.wait > std::chrono::milliseconds::zero()) {
    const bool installed = cancel->install([state] {
      if (!state->answered.exchange(true))
        state->done(std::make_exception_ptr(operation_cancelled()), acquire_result{in_flight{}});
    });
    if (!installed) {
      state->done(std::make_exception_ptr(operation_cancelled()), acquire_result{in_flight{}});
      return;
    }
  }
  detail::blocking_pool::shared().post([this, state, cancel] {
    std::exception_ptr error;
    acquire_result answer{in_flight{}};
    try {
      answer = try_acquire(state->ctx);
    } catch (...) {
      error = std::current_exception();
    }
    if (cancel != nullptr) cancel->clear();
    if (!state->answered.exchange(true)) {
      // Moved: the caller's thread, not this one, must hold an error's last reference (the
      // exception's destructor races with the caller's reads otherwise, as ThreadSanitizer sees it).
      state->done(std::move(error), std::move(answer));
      return;
    }
    // Cancelled meanwhile: nobody will run the action for a record acquired after all.
    if (auto* got = std::get_if<acquired>(&answer)) {
      try {
        release(state->ctx.id, got->token);
      } catch (...) {
        // It stays in progress until its lease expires.
      }
    }
  });
}

void store::async_complete(const identity& id, const lease_token& token, const payload& value,
                           std::chrono::milliseconds ttl, async_done done) {
  detail::blocking_pool::shared().run_and_report([this, id, token, value, ttl] { complete(id, token, value, ttl); },
                                                 std::move(done));
}

void store::async_release(const identity& id, const lease_token& token, async_done done) {
  detail::blocking_pool::shared().run_and_report([this, id, token] { release(id, token); }, std::move(done));
}

void store::async_join_problem(const transaction& tx, async_handler<std::string> done) const {
  // The answer travels beside the report: run_and_report carries only whether it threw.
  auto problem = std::make_shared<std::string>();
  detail::blocking_pool::shared().run_and_report(
      [this, &tx, problem] { *problem = join_problem(tx); },
      [problem, done = std::move(done)](std::exception_ptr error) { done(std::move(error), std::move(*problem)); });
}

void store::async_complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                                          std::chrono::milliseconds ttl, transaction& tx, async_done done) {
  detail::blocking_pool::shared().run_and_report(
      [this, id, token, value, ttl, &tx] { complete_in_transaction(id, token, value, ttl, tx); }, std::move(done));
}

store_unavailable_error detail::destroyed_while_waiting(std::string_view store, const identity& id) {
  const std::string record = id.to_string();
  return store_unavailable_error(
      fmt::format("{}: cannot try_acquire {}: the store was destroyed while the caller waited", store, record),
      "try_acquire", record);
}

}  // namespace idem

namespace idem {

namespace {

[[noreturn]] void no_administration(const store& s, std::string_view operation) {
  throw configuration_error(fmt::format("{} does not offer administration ({})", s.name(), operation));
}

}  // namespace

std::optional<record_summary> store::inspect_record(const identity&, bool) { no_administration(*this, "inspect"); }

std::vector<record_summary> store::list_records(const record_query&) { no_administration(*this, "list"); }

admin_release store::release_record(const identity&, bool) { no_administration(*this, "release"); }

record_counts store::count_records() { no_administration(*this, "count"); }

}  // namespace idem
