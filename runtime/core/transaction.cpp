// runtime/core/transaction.cpp — the thread's transaction binding and idem::basic_transaction.
#include <idem/errors.hpp>
#include <idem/transaction.hpp>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "blocking_pool.hpp"
#include "caught.hpp"

namespace idem {
namespace {
thread_local transaction* current = nullptr;

void run_all(std::vector<std::function<void()>>& callbacks) noexcept {
  // Callbacks may register further callbacks; run until the list is drained.
  while (!callbacks.empty()) {
    std::vector<std::function<void()>> batch;
    batch.swap(callbacks);
    for (auto& callback : batch) {
      try {
        callback();
      } catch (...) {
        // Documented: a callback that throws is ignored (the engine's own callbacks never throw).
      }
    }
  }
}

void run_now(std::function<void()>& callback) noexcept {
  try {
    callback();
  } catch (...) {
  }
}
}  // namespace

transaction* current_transaction() noexcept { return current; }

std::optional<transaction_demand> parse_transaction_demand(std::string_view text) noexcept {
  const auto is = [text](std::string_view word) {
    return std::equal(text.begin(), text.end(), word.begin(), word.end(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) == static_cast<unsigned char>(b);
    });
  };
  if (is("caller")) return transaction_demand::caller;
  if (is("required")) return transaction_demand::required;
  return std::nullopt;
}

std::string_view to_string(transaction_demand demand) noexcept {
  return demand == transaction_demand::caller ? "caller" : "required";
}

std::unique_ptr<opened_transaction> transaction_source::begin_unbound() {
  throw configuration_error(
      "this idem::transaction_source cannot begin a transaction bound to no thread, which a coroutine method "
      "annotated with transaction = \"required\" needs: construct its transactions with idem::unbound");
}

void opened_transaction::async_commit(async_done done) {
  done(detail::caught([&] { commit(); }));
}

void opened_transaction::async_rollback(async_done done) { done(nullptr); }

void transaction_source::async_begin_unbound(async_handler<std::unique_ptr<opened_transaction>> done) {
  std::unique_ptr<opened_transaction> begun;
  std::exception_ptr error = detail::caught([&] { begun = begin_unbound(); });
  done(std::move(error), std::move(begun));
}

void detail::run_blocking(std::function<void()> step, async_done done) {
  blocking_pool::shared().run_and_report(std::move(step), std::move(done));
}

std::unique_ptr<opened_transaction> detail::open_unless_active(transaction_source* source,
                                                               std::string_view function) {
  if (const transaction* tx = current_transaction(); tx != nullptr && tx->active()) return nullptr;
  return required_source(source, function).begin();
}

transaction_source& detail::required_source(transaction_source* source, std::string_view function) {
  if (source == nullptr)
    throw configuration_error(fmt::format("{} is annotated with transaction = \"required\" and runs in no active "
                                          "transaction, but no idem::transaction_source was given to begin one",
                                          function));
  return *source;
}

transaction_binding::transaction_binding(transaction& tx) noexcept : previous_(current) { current = &tx; }
transaction_binding::~transaction_binding() { current = previous_; }

void basic_transaction::before_commit(std::function<void()> check) {
  if (state_ != state::active) throw error("before_commit on a transaction that already ended");
  before_commit_.push_back(std::move(check));
}

void basic_transaction::after_commit(std::function<void()> callback) {
  if (state_ == state::active)
    on_commit_.push_back(std::move(callback));
  else if (state_ == state::committed)
    run_now(callback);
}

void basic_transaction::after_rollback(std::function<void()> callback) {
  if (state_ == state::active)
    on_rollback_.push_back(std::move(callback));
  else if (state_ == state::rolled_back)
    run_now(callback);
}

void basic_transaction::prepare_commit() {
  // A check may register further checks; each runs once.
  for (std::size_t i = 0; i < before_commit_.size(); ++i) {
    std::function<void()> check = std::move(before_commit_[i]);
    check();
  }
  before_commit_.clear();
}

void basic_transaction::finish_commit() noexcept { finish(state::committed, on_commit_, on_rollback_); }

void basic_transaction::finish_rollback() noexcept { finish(state::rolled_back, on_rollback_, on_commit_); }

void basic_transaction::finish(state end, std::vector<std::function<void()>>& happened,
                               std::vector<std::function<void()>>& never) noexcept {
  if (state_ != state::active) return;
  state_ = end;
  before_commit_.clear();
  never.clear();
  run_all(happened);
}

}  // namespace idem
