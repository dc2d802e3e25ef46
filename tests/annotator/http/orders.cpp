// The annotated Beast controller's bodies; see orders.hpp.
#include "orders.hpp"

#include <string>

#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace shop {

namespace bhttp = boost::beast::http;

boost::asio::awaitable<idem::http::beast::response_type> Orders::place(const idem::http::beast::request_type& request) {
  const int n = ++placed;
  // Suspends once, as a handler that talks to another service does.
  co_await boost::asio::post(co_await boost::asio::this_coro::executor, boost::asio::use_awaitable);
  idem::http::beast::response_type res{bhttp::status::created, request.version()};
  res.set(bhttp::field::content_type, "text/plain");
  res.body() = "order " + std::to_string(n) + " of " + request.body();
  co_return res;
}

boost::asio::awaitable<idem::http::beast::response_type> Refunds::issue(
    const idem::http::beast::request_type& request) const {
  ++issued;
  idem::http::beast::response_type res{bhttp::status::ok, request.version()};
  res.body() = "refunded";
  co_return res;
}

}  // namespace shop
