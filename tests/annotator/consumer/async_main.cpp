// A consumer of the installed idem::asio: 200 coroutines on one io_context thread, 100 keys called
// twice at once, each action a 20 ms timer; prints what ran and what was replayed.
#include <chrono>
#include <cstdio>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/asio.hpp>
#include <idem/idem.hpp>

namespace asio = boost::asio;

int main() {
  idem::memory_store store;
  idem::engine engine{store};
  asio::io_context io;
  int ran = 0;
  int replayed = 0;
  for (int k = 0; k < 100; ++k) {
    for (int copy = 0; copy < 2; ++copy) {
      asio::co_spawn(
          io,
          [&, k]() -> asio::awaitable<void> {
            auto ctx = engine.make_context("Consumer.async", "order-" + std::to_string(k));
            auto o = co_await idem::async_execute(
                engine, ctx,
                [k]() -> asio::awaitable<int> {
                  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(20));
                  co_await timer.async_wait(asio::use_awaitable);
                  co_return k;
                },
                idem::json_codec{}, asio::use_awaitable);
            if (o.value() != k) throw std::runtime_error("a call was answered with another key's result");
            (o.ran() ? ran : replayed)++;
          },
          asio::detached);
    }
  }
  io.run();
  std::printf("async: %d ran, %d replayed on one thread\n", ran, replayed);
  return ran == 100 && replayed == 100 ? 0 : 1;
}
