// samples/async_orders — an order consumer on Boost.Asio: one io_context thread, a coroutine
// handler guarded by idem::guarded<OrderConsumer> (generated from order_consumer.hpp). The broker
// here delivers 100 orders, each twice at once (a redelivery racing the first), and then 20 again
// later (redeliveries after the fact); every order is charged once, every delivery gets its receipt.
//
//   idem_sample_async_orders
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <idem/idem.hpp>

#include "order_consumer.idem.hpp"

namespace asio = boost::asio;

int main() {
  idem::memory_store store;
  idem::engine engine{store};
  idem::guarded<shop::OrderConsumer> consumer{engine};
  asio::io_context io;  // run by this thread alone

  int delivered = 0;
  int ran = 0;
  int replayed = 0;
  int wrong = 0;
  auto deliver = [&](shop::Order order) -> asio::awaitable<void> {
    const shop::Receipt receipt = co_await consumer.on(order);
    ++delivered;
    if (receipt.order_id != order.id || receipt.charged != order.cents) ++wrong;
  };
  const auto started = std::chrono::steady_clock::now();
  std::vector<shop::Order> orders;
  for (int i = 0; i < 100; ++i) orders.push_back({"order-" + std::to_string(i), 100 + i});
  for (const shop::Order& order : orders) {
    asio::co_spawn(io, deliver(order), asio::detached);
    asio::co_spawn(io, deliver(order), asio::detached);  // the racing redelivery
  }
  io.run();
  const auto first_wave = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  for (int i = 0; i < 20; ++i) asio::co_spawn(io, deliver(orders[static_cast<std::size_t>(i * 5)]), asio::detached);
  io.restart();
  io.run();

  ran = consumer.executions;
  replayed = delivered - ran;
  std::printf("deliveries: %d (100 orders twice at once, then 20 redelivered)\n", delivered);
  std::printf("charged: %d (once per order), replayed: %d, wrong receipts: %d\n", ran, replayed, wrong);
  std::printf("the 200 concurrent deliveries took %lld ms on one thread (each charge waits 50 ms)\n",
              static_cast<long long>(first_wave.count()));
  return delivered == 220 && ran == 100 && wrong == 0 ? 0 : 1;
}
