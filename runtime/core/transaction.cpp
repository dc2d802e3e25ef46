#include <idem/transaction.hpp>

namespace idem {
namespace {
thread_local transaction* current = nullptr;
}  // namespace

transaction* current_transaction() noexcept { return current; }

transaction_binding::transaction_binding(transaction& tx) noexcept : previous_(current) { current = &tx; }
transaction_binding::~transaction_binding() { current = previous_; }

void basic_transaction::after_commit(std::function<void()> callback) { on_commit_.push_back(std::move(callback)); }
void basic_transaction::after_rollback(std::function<void()> callback) { on_rollback_.push_back(std::move(callback)); }

namespace {
void run_all(std::vector<std::function<void()>>& callbacks) noexcept {
  // Callbacks may register further callbacks; run until the list is drained.
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
}  // namespace

void basic_transaction::finish_commit() noexcept {
  if (!active_) return;
  active_ = false;
  on_rollback_.clear();
  run_all(on_commit_);
}

void basic_transaction::finish_rollback() noexcept {
  if (!active_) return;
  active_ = false;
  on_commit_.clear();
  run_all(on_rollback_);
}

}  // namespace idem
