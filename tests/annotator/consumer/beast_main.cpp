// A consumer of the installed idem::beast: an annotated Beast endpoint on a real server on
// 127.0.0.1, called twice with one Idempotency-Key by a Beast client on the same io_context
// thread; prints what ran and what was replayed.
#include <cstdio>
#include <exception>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <idem/idem.hpp>

#include "orders.idem.hpp"

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

asio::awaitable<idem::http::beast::response_type> Orders::place(const idem::http::beast::request_type& request) {
  idem::http::beast::response_type res{bhttp::status::created, request.version()};
  res.body() = "order " + std::to_string(++placed) + " of " + request.body();
  co_return res;
}

int main() {
  idem::memory_store store;
  idem::engine engine{store};
  Orders orders;
  idem::http::beast::router routes;
  idem::http::beast::route<&Orders::place>(routes, "POST", "/orders", engine, orders);

  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  asio::co_spawn(io, idem::http::beast::serve(acceptor, routes), asio::detached);
  int replayed = 0;
  std::string bodies;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        boost::beast::tcp_stream stream{co_await asio::this_coro::executor};
        co_await stream.async_connect(acceptor.local_endpoint(), asio::use_awaitable);
        boost::beast::flat_buffer buffer;
        for (int call = 0; call < 2; ++call) {
          bhttp::request<bhttp::string_body> req{bhttp::verb::post, "/orders", 11};
          req.set(bhttp::field::host, "127.0.0.1");
          req.set("Idempotency-Key", "order-1");
          req.body() = "2 books";
          req.prepare_payload();
          co_await bhttp::async_write(stream, req, asio::use_awaitable);
          bhttp::response<bhttp::string_body> res;
          co_await bhttp::async_read(stream, buffer, res, asio::use_awaitable);
          if (res["Idempotent-Replayed"] == "true") ++replayed;
          bodies += res.body() + ";";
        }
        acceptor.close();
      },
      [&](std::exception_ptr error) {
        if (error) std::rethrow_exception(error);
        io.stop();
      });
  io.run();
  std::printf("beast: %d ran, %d replayed (%s)\n", orders.placed, replayed, bodies.c_str());
  return orders.placed == 1 && replayed == 1 && bodies == "order 1 of 2 books;order 1 of 2 books;" ? 0 : 1;
}
