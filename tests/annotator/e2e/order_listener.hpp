// An annotated class and free function, built through idem_generate by the end-to-end test.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include <idem/json_codec.hpp>

#include "order_types.hpp"

namespace shop {

class OrderListener {
 public:
  virtual ~OrderListener() = default;

  // A consumer: a redelivery while the first is running is declined at once.
  [[idem::idempotent(key = "event.id", waitTimeout = "PT0S")]]
  virtual void on(const OrderPlaced& event);

  // A caller that waits (up to 10 s) for a concurrent first run gets its result.
  [[idem::idempotent(key = "cmd.customer + \":\" + cmd.order", ttl = "P1D", waitTimeout = "PT10S",
                     codec = "idem::json_codec")]]
  virtual Receipt settle(const SettleCommand& cmd);

  // Runs inside every action, so that a test can hold an execution open.
  std::function<void()> during_action;
  std::atomic<int> handled{0};
  std::atomic<int> settled{0};
};

}  // namespace shop

struct Job {
  long id;
};

inline std::atomic<int> index_rebuilds{0};

// Empty values are the defaults: the scope is "rebuild_index" (not named), ttl and completion the
// engine's.
[[idem::idempotent(key = "job.id", scope = "", ttl = "", lease = "PT5M", completion = "")]] void rebuild_index(
    const Job& job);
