// tests/support/test_transaction.hpp — transactions with nothing behind them but the engine's
// callbacks: enough to test how the engine takes part in one.
#pragma once

#include <idem/transaction.hpp>

namespace idem::test {

// Not bound to any thread: what an asynchronous call is handed explicitly.
class unbound_transaction : public basic_transaction {
 public:
  ~unbound_transaction() override { finish_rollback(); }
  // Like a real transaction: a before-commit check that throws rolls back and propagates.
  void commit() {
    try {
      prepare_commit();
    } catch (...) {
      finish_rollback();
      throw;
    }
    finish_commit();
  }
  void rollback() { finish_rollback(); }
};

// Bound to the creating thread for its lifetime: what a blocking call finds.
class test_transaction : public unbound_transaction {
 public:
  test_transaction() : binding_(*this) {}

 private:
  transaction_binding binding_;
};

}  // namespace idem::test
