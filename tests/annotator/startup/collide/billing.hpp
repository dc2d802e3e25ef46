// One of two headers, generated separately, whose functions both default to scope "handle".
#pragma once

#include "invoice.hpp"

namespace billing {
inline int handled = 0;
[[idem::idempotent(key = "invoice.id")]] void handle(const Invoice& invoice);
}  // namespace billing
