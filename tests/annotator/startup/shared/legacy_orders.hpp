// Another header whose function names the scope "place" on purpose (the old entry point of the
// same unit of work), with the same settings: the two share records, and the engine starts.
#pragma once

#include "orders.hpp"

namespace legacy {
inline int placed = 0;
[[idem::idempotent(key = "order.id", scope = "place", lease = "PT1M")]] void place_order(const Order& order);
}  // namespace legacy
