// A method, an inherited method and a free function annotated with transaction = "required", over
// a transaction framework of the user's own (not SQL): idem::guarded<C> and idem::invoke begin its
// transactions through an idem::transaction_source. Built through idem_generate.
#pragma once

#include <stdexcept>
#include <vector>

#include <idem/transaction.hpp>

namespace journal {

// The user's storage: entries become visible when the transaction that wrote them commits.
struct book {
  std::vector<int> entries;
  int begun = 0;  // transactions begun on it
};

// The user's transaction type: RAII, bound to its thread, writes kept until commit.
class transaction final : public idem::basic_transaction {
 public:
  explicit transaction(book* b) : book_(b), binding_(*this) { ++book_->begun; }
  ~transaction() override { finish_rollback(); }
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;

  void write(int entry) { pending_.push_back(entry); }
  void commit() {
    prepare_commit();
    book_->entries.insert(book_->entries.end(), pending_.begin(), pending_.end());
    finish_commit();
  }
  // The transaction bound to this thread, as the business code reaches it.
  static transaction& current() { return dynamic_cast<transaction&>(*idem::current_transaction()); }

 private:
  book* book_;
  std::vector<int> pending_;
  idem::transaction_binding binding_;
};

using transaction_source = idem::basic_transaction_source<transaction, book*>;

class Journal {
 public:
  virtual ~Journal() = default;
  // Writes `id` in the current transaction; throws after the write when `id` is negative.
  [[idem::idempotent(key = "id", transaction = "required")]]
  virtual void append(int id);
  int appends = 0;
};

// Annotates nothing: its inherited append still runs in a transaction its wrapper begins.
class AuditedJournal : public Journal {};

[[idem::idempotent(key = "id", transaction = "required")]]
void append_entry(int id);

}  // namespace journal
