// idem/transaction.hpp — how the engine takes part in the caller's transaction.
//
// A transaction that idem can see is an idem::transaction bound to the calling thread. The SQL
// stores ship RAII transactions over the user's own connection (idem::sqlite_transaction,
// idem::postgres_transaction) that bind themselves; other transaction frameworks implement the
// interface and bind with idem::transaction_binding.
#pragma once

#include <functional>
#include <vector>

namespace idem {

// idem::transaction
//
// The engine's view of a transaction: whether it is active, and callbacks to run once it ends.
// Exactly one of the two callback lists runs, once, when the transaction ends; an unknown
// outcome counts as a rollback.
class transaction {
 public:
  virtual ~transaction() = default;

  // True while the transaction can still commit.
  virtual bool active() const = 0;
  // Runs `callback` after a successful commit.
  virtual void after_commit(std::function<void()> callback) = 0;
  // Runs `callback` after a rollback (including a destructor that rolls back).
  virtual void after_rollback(std::function<void()> callback) = 0;
};

// The innermost transaction bound to the calling thread, or nullptr.
transaction* current_transaction() noexcept;

// idem::transaction_binding
//
// RAII: binds `tx` to the calling thread for the binding's lifetime, so that calls through the
// engine on this thread take part in it. Bindings nest; they must be destroyed in reverse order
// on the thread that created them. Not copyable, not movable.
class transaction_binding {
 public:
  explicit transaction_binding(transaction& tx) noexcept;
  ~transaction_binding();
  transaction_binding(const transaction_binding&) = delete;
  transaction_binding& operator=(const transaction_binding&) = delete;

 private:
  transaction* previous_;
};

// idem::basic_transaction
//
// A helper for implementations: keeps the callback lists and runs them. A derived class calls
// finish_commit() after its commit succeeded and finish_rollback() after it rolled back; each
// runs its list once and marks the transaction inactive. Callbacks must not throw (a callback that
// throws is ignored).
class basic_transaction : public transaction {
 public:
  bool active() const override { return active_; }
  void after_commit(std::function<void()> callback) override;
  void after_rollback(std::function<void()> callback) override;

 protected:
  void finish_commit() noexcept;
  void finish_rollback() noexcept;

 private:
  bool active_ = true;
  std::vector<std::function<void()>> on_commit_;
  std::vector<std::function<void()>> on_rollback_;
};

}  // namespace idem
