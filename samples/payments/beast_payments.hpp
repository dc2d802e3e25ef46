// samples/payments/beast_payments.hpp — POST /payments on Boost.Beast: an annotated coroutine
// method, which idem-annotate recognises as an endpoint and idem::http::beast::route<&C::m> adds to
// the router. It names the scope of PaymentController::create, with the same options, so both
// servers share records: a payment created through one is replayed by the other.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <idem/http/beast_server.hpp>

#include "payment_controller.hpp"

namespace payments {

class BeastPayments {
 public:
  explicit BeastPayments(PaymentController& payments) : payments_(payments) {}

  // POST /payments, as PaymentController::create answers it; a slow provider is waited for
  // without holding the thread.
  [[idem::idempotent(scope = "PaymentController.create", waitTimeout = "PT0S")]]
  boost::asio::awaitable<idem::http::beast::response_type> create(const idem::http::beast::request_type& req);

 private:
  PaymentController& payments_;
};

// `r` as Beast writes it.
[[nodiscard]] idem::http::beast::response_type to_response(const reply& r);

}  // namespace payments
