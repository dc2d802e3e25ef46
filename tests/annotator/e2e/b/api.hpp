// The other api.hpp: generated as e2e/b/api.idem.hpp.
#pragma once

namespace beta {
inline int calls = 0;
[[idem::idempotent(key = "id", scope = "beta.ping")]] void ping(int id);
}  // namespace beta
