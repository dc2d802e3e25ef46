// The benchmark's annotated header: a dozen standard headers, as a real service header has,
// and a handful of annotated functions with keys and a codec.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include <idem/json_codec.hpp>

namespace bench {

struct order {
  std::string id;
  std::string customer;
  std::vector<int> lines;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(order, id, customer, lines)
};

struct receipt {
  std::string text;
  long cents = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(receipt, text, cents)
};

inline long total(const order& o) {
  auto positive = o.lines | std::views::filter([](int n) { return n > 0; });
  long sum = 0;
  for (int n : positive) sum += n;
  return sum;
}

class service {
 public:
  virtual ~service() = default;

  [[idem::idempotent(key = "o.id", waitTimeout = "PT0S")]]
  virtual void accept(const order& o);

  [[idem::idempotent(key = "o.customer + \":\" + o.id", ttl = "P1D", codec = "idem::json_codec")]]
  virtual receipt charge(const order& o);

  [[idem::idempotent(key = "o.id", lease = "PT5M", completion = "autonomous")]]
  void ship(const order& o);

  [[idem::idempotent(key = "customer", scope = "service.notify")]]
  void notify(const std::string& customer, std::string_view text);

 private:
  std::unordered_map<std::string, std::optional<receipt>> cache_;
};

[[idem::idempotent(key = "id", lease = "PT1M")]] void reindex(long id);

}  // namespace bench
