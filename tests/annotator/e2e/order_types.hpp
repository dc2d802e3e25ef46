// The value types of the end-to-end test; a separate header that the annotated one includes, so
// that the incremental-build test can touch it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace shop {

struct OrderPlaced {
  std::string id;
  int amount = 0;
};

struct SettleCommand {
  std::string customer;
  std::string order;
};

struct Receipt {
  std::string text;
  int run = 0;  // which execution produced it
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(Receipt, text, run)
};

}  // namespace shop
