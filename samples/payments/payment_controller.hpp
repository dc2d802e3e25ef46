// samples/payments/payment_controller.hpp — a payments API whose POST is an idempotent endpoint.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <httplib.h>

#include <idem/http/httplib.hpp>

namespace payments {

struct payment {
  std::string id;
  std::int64_t amount = 0;
  std::string currency;
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

 private:
  mutable std::mutex mutex_;
  std::vector<payment> payments_;
};

}  // namespace payments
