// A method, an inherited method and a free function annotated with transaction = "required", over
// a transaction framework of the user's own (journal_book.hpp): idem::guarded<C> and idem::invoke
// begin its transactions through an idem::transaction_source. Built through idem_generate.
#pragma once

#include "journal_book.hpp"

namespace journal {

class Journal {
 public:
  explicit Journal(book* b) : book_(b) {}
  virtual ~Journal() = default;
  // Writes `id` in the transaction open on the book; throws after the write when `id` is negative.
  [[idem::idempotent(key = "id", transaction = "required")]]
  virtual void append(int id);
  int appends = 0;

 private:
  book* book_;
};

// Annotates nothing: its inherited append still runs in a transaction its wrapper begins.
class AuditedJournal : public Journal {
 public:
  using Journal::Journal;
};

[[idem::idempotent(key = "id", transaction = "required")]]
void append_entry(book& b, int id);

}  // namespace journal
