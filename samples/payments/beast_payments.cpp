// samples/payments/beast_payments.cpp — see beast_payments.hpp.
#include "beast_payments.hpp"

#include <variant>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace payments {

namespace asio = boost::asio;

idem::http::beast::response_type to_response(const reply& r) {
  idem::http::beast::response_type res{static_cast<boost::beast::http::status>(r.status), 11};
  res.set(boost::beast::http::field::content_type, r.content_type);
  if (!r.location.empty()) res.set(boost::beast::http::field::location, r.location);
  res.body() = r.body;
  return res;
}

asio::awaitable<idem::http::beast::response_type> BeastPayments::create(const idem::http::beast::request_type& req) {
  auto read = PaymentController::read_order(req.body());
  if (auto* refused = std::get_if<reply>(&read)) co_return to_response(*refused);
  const order o = std::get<order>(read);
  if (o.delay.count() > 0) {  // the provider is slow: wait without holding the thread
    asio::steady_timer provider(co_await asio::this_coro::executor, o.delay);
    co_await provider.async_wait(asio::use_awaitable);
  }
  co_return to_response(payments_.place(o));
}

}  // namespace payments
