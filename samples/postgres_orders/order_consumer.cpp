// samples/postgres_orders/order_consumer.cpp — the business body: one INSERT, no idempotency
// code and no transaction handling.
#include "order_consumer.hpp"

#include <libpq-fe.h>

#include <memory>
#include <stdexcept>

namespace orders {

void OrderConsumer::on_order(const OrderPlaced& order) {
  ++runs_;
  const std::string quantity = std::to_string(order.quantity);
  const char* values[] = {order.id.c_str(), order.item.c_str(), quantity.c_str()};
  const std::unique_ptr<PGresult, decltype(&PQclear)> r(
      PQexecParams(db_, "INSERT INTO orders (id, item, quantity) VALUES ($1, $2, $3::int)", 3, nullptr, values,
                   nullptr, nullptr, 0),
      &PQclear);
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) throw std::runtime_error(PQresultErrorMessage(r.get()));
  if (after_insert) after_insert();
}

}  // namespace orders
