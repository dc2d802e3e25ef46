// A transaction framework of the user's own, not SQL, for the transaction = "required" tests: a
// book whose entries become visible when the transaction that wrote them commits. The business
// code reaches the open transaction through the book, as SQL code reaches it through its
// connection.
#pragma once

#include <optional>
#include <stdexcept>
#include <vector>

#include <idem/transaction.hpp>

namespace journal {

class transaction;

struct book {
  std::vector<int> entries;
  int begun = 0;                  // transactions begun on it
  transaction* open = nullptr;    // the one open now
};

// RAII, bound to its thread unless begun with idem::unbound (for a coroutine).
class transaction final : public idem::basic_transaction {
 public:
  explicit transaction(book* b) : transaction(b, idem::unbound) { binding_.emplace(*this); }
  transaction(book* b, idem::unbound_t) : book_(b) {
    ++book_->begun;
    book_->open = this;
  }
  ~transaction() override {
    finish_rollback();
    book_->open = nullptr;
  }
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;

  void write(int entry) { pending_.push_back(entry); }
  void commit() {
    prepare_commit();
    book_->entries.insert(book_->entries.end(), pending_.begin(), pending_.end());
    book_->open = nullptr;
    finish_commit();
  }

 private:
  book* book_;
  std::vector<int> pending_;
  std::optional<idem::transaction_binding> binding_;
};

using transaction_source = idem::basic_transaction_source<transaction, book*>;

// The transaction open on `b`.
inline transaction& open_on(book& b) {
  if (b.open == nullptr) throw std::logic_error("no transaction is open on the book");
  return *b.open;
}

}  // namespace journal
