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
// The engine's view of a transaction: whether it is active, checks to run before it commits, and
// callbacks to run once it ends. Exactly one of the two callback lists runs, once, when the
// transaction ends; an unknown outcome counts as a rollback.
class transaction {
 public:
  virtual ~transaction() = default;

  // True while the transaction can still commit.
  virtual bool active() const = 0;
  // Runs `check` just before the commit. A check that throws stops the commit: the transaction
  // rolls back and the commit throws what the check threw. The engine confirms here that it
  // still holds the lease of every record the transaction's work belongs to.
  virtual void before_commit(std::function<void()> check) = 0;
  // Runs `callback` after a successful commit; at once if the transaction already committed.
  virtual void after_commit(std::function<void()> callback) = 0;
  // Runs `callback` after a rollback (including a destructor that rolls back); at once if the
  // transaction already rolled back.
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
// A helper for implementations: keeps the check and callback lists and runs them. A derived
// class calls prepare_commit() before it commits (and rolls back instead if that throws),
// finish_commit() after its commit succeeded and finish_rollback() after it rolled back; each of
// the last two runs its list once and ends the transaction. A callback registered after the end
// runs at once if the transaction ended its way and is discarded otherwise (its event can no
// longer happen). Callbacks must not throw (one that throws is ignored); checks may.
class basic_transaction : public transaction {
 public:
  bool active() const override { return state_ == state::active; }
  // Throws idem::error if the transaction already ended: nothing is left to check.
  void before_commit(std::function<void()> check) override;
  void after_commit(std::function<void()> callback) override;
  void after_rollback(std::function<void()> callback) override;

 protected:
  // Runs the before-commit checks in order; the first that throws stops the others and its
  // exception propagates.
  void prepare_commit();
  void finish_commit() noexcept;
  void finish_rollback() noexcept;

 private:
  enum class state { active, committed, rolled_back };
  // Ends the transaction as `end`: runs the callbacks of what `happened`, drops those that `never` will.
  void finish(state end, std::vector<std::function<void()>>& happened,
              std::vector<std::function<void()>>& never) noexcept;
  state state_ = state::active;
  std::vector<std::function<void()>> before_commit_;
  std::vector<std::function<void()>> on_commit_;
  std::vector<std::function<void()>> on_rollback_;
};

}  // namespace idem
