// A new user's first annotations, with the three typos everyone makes.
#pragma once

#include <string>

struct OrderPlaced {
  std::string id;
};
struct Receipt {
  std::string text;
};

struct OrderListener {
  [[idem::idempotent(key = "event.ids", lease = "PT30")]]
  void on(const OrderPlaced& event);

  [[idem::idempotent(key = "event.id")]]
  Receipt settle(const OrderPlaced& event);
};
