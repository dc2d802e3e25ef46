// A function with the default scope "place".
#pragma once

struct Order {
  long id;
};

namespace orders {
inline int placed = 0;
[[idem::idempotent(key = "order.id", lease = "PT1M")]] void place(const Order& order);
}  // namespace orders
