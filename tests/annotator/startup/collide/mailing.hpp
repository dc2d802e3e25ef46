// The other header: same default scope "handle", same settings. Neither names the scope, so the
// two would share records by accident; the engine refuses to start.
#pragma once

#include "invoice.hpp"

namespace mailing {
inline int handled = 0;
[[idem::idempotent(key = "invoice.id")]] void handle(const Invoice& invoice);
}  // namespace mailing
