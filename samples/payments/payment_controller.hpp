// samples/payments/payment_controller.hpp — a payments API whose POST is an idempotent endpoint,
// served by cpp-httplib (the default) or Boost.Beast (--server beast).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <httplib.h>

#include <idem/http/httplib.hpp>

namespace payments {

struct payment {
  std::string id;
  std::int64_t amount = 0;
  std::string currency;
};

// An answer, whichever server writes it.
struct reply {
  int status = 200;
  std::string content_type;
  std::string body;
  std::string location;  // empty: no Location header
};

// A valid request to create a payment, and how long its provider takes.
struct order {
  std::int64_t amount = 0;
  std::string currency;
  std::chrono::milliseconds delay{0};
};

class PaymentController {
 public:
  // POST /payments {"amount": 1200, "currency": "EUR", "delay_ms": 0} → 201 + Location.
  // Every execution creates a new payment; idem makes a retried request replay the first answer.
  // An endpoint: its key comes from the Idempotency-Key header, never from the parameters.
  [[idem::idempotent(waitTimeout = "PT0S")]]
  void create(const httplib::Request& req, httplib::Response& res);

  // GET /payments → {"count": n, "payments": [...]}: what was really created.
  void list(const httplib::Request& req, httplib::Response& res) const;

  // GET /payments/<id> → the payment or 404.
  void get(const httplib::Request& req, httplib::Response& res) const;

  // The same, for any server. read_order() answers a bad request with the 400 to send; place()
  // creates the payment once the provider's delay has passed (the caller waits it out its way).
  [[nodiscard]] static std::variant<order, reply> read_order(std::string_view body);
  [[nodiscard]] reply place(const order& o);
  [[nodiscard]] reply listing() const;
  [[nodiscard]] reply find(std::string_view id) const;

 private:
  mutable std::mutex mutex_;
  std::vector<payment> payments_;
};

}  // namespace payments
