// samples/annotated/order_consumer.hpp — an order consumer made idempotent by annotation.
//
// idem-annotate reads the attributes below at build time, rejects any misconfiguration with a
// caret under it, and generates idem::guarded<orders::consumer>: construct that instead of the
// consumer and every annotated method runs at most once per key.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include <idem/json_codec.hpp>

namespace orders {

struct delivery {
  std::string order;  // the idempotency key: the same order delivered twice is one charge
  std::string id;     // which delivery this is (a broker's message id)
  int cents = 0;
};

struct receipt {
  std::string order;
  std::string charged_by;  // the delivery whose execution produced this receipt
  int cents = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(receipt, order, charged_by, cents)
};

class consumer {
 public:
  virtual ~consumer() = default;

  // Charges an order once; a duplicate (even a concurrent one, which waits) gets the receipt.
  [[idem::idempotent(key = "d.order", ttl = "P1D", waitTimeout = "PT10S", codec = "idem::json_codec")]]
  virtual receipt charge(const delivery& d);

  // Ships an order once; a redelivery while the first is still running is declined at once
  // (idem::in_flight_error) so that the broker redelivers later instead of parking a thread.
  [[idem::idempotent(key = "d.order", lease = "PT30S", waitTimeout = "PT0S")]]
  virtual void ship(const delivery& d);

  // How many times each order was really charged / shipped.
  std::map<std::string, int> charges() const;
  std::map<std::string, int> shipments() const;

  // Runs inside ship(), so that the sample can hold a shipment open.
  std::function<void()> while_shipping;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int> charges_;
  std::map<std::string, int> shipments_;
};

}  // namespace orders
