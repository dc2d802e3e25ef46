// samples/postgres_orders/order_consumer.hpp — the consumer, annotated: its order row and its
// idempotency record commit in one PostgreSQL transaction, which its generated wrapper begins.
#pragma once

#include <functional>
#include <string>

#include <idem/postgres_transaction.hpp>

namespace orders {

struct OrderPlaced {
  std::string id;
  std::string item;
  int quantity = 0;
};

class OrderConsumer {
 public:
  // `db`: the application's connection; the order row is inserted through it.
  explicit OrderConsumer(PGconn* db) : db_(db) {}
  virtual ~OrderConsumer() = default;

  // One delivery of `order`. transaction = "required": idem::guarded<OrderConsumer> begins the
  // transaction (on the connection of its idem::postgres_transaction_source) before it claims the
  // key, and commits it when on_order returns; join-transaction writes the record inside it.
  [[idem::idempotent(key = "order.id", lease = "PT2S", waitTimeout = "PT0S", completion = "join-transaction",
                     transaction = "required")]]
  virtual void on_order(const OrderPlaced& order);

  // How many times on_order's body ran in this process.
  int runs() const noexcept { return runs_; }
  // Runs after the insert, inside the transaction: the sample makes a consumer die or fail there.
  std::function<void()> after_insert;

 private:
  PGconn* db_;
  int runs_ = 0;
};

}  // namespace orders
