// One of two headers named api.hpp in one idem_generate call (see b/api.hpp): generated under
// its directory relative to the CMakeLists.txt, as e2e/a/api.idem.hpp.
#pragma once

namespace alpha {
inline int calls = 0;
[[idem::idempotent(key = "id", scope = "alpha.ping")]] void ping(int id);
}  // namespace alpha
