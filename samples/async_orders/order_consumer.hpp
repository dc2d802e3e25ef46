// samples/async_orders/order_consumer.hpp — an order consumer whose handler is a coroutine: it
// suspends while it charges the order (a timer stands in for a payment service), and idem runs it
// once per order id however often the broker delivers it.
#pragma once

#include <chrono>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/json_codec.hpp>

namespace shop {

struct Order {
  std::string id;
  long cents = 0;
};

struct Receipt {
  std::string order_id;
  long charged = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Receipt, order_id, charged)

class OrderConsumer {
 public:
  virtual ~OrderConsumer() = default;

  // A duplicate delivered while the first is charging waits up to 5 s for its receipt.
  [[idem::idempotent(key = "order.id", codec = "idem::json_codec", waitTimeout = "PT5S")]]
  virtual boost::asio::awaitable<Receipt> on(const Order& order) {
    ++executions;
    const Order copy = order;  // what the coroutine needs after it suspends
    boost::asio::steady_timer payment(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(50));
    co_await payment.async_wait(boost::asio::use_awaitable);
    co_return Receipt{copy.id, copy.cents};
  }

  int executions = 0;
};

}  // namespace shop
