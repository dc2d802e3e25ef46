// A class whose base is annotated in another header (accounts.hpp): idem::guarded<Premium>
// guards the inherited methods with the base's policies, from accounts.idem.hpp.
#pragma once

#include "accounts.hpp"

namespace bank {

class Premium : public Account {
 public:
  [[idem::idempotent(key = "id")]] void upgrade(int id);
  int upgrades = 0;
};

}  // namespace bank
