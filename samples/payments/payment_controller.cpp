// samples/payments/payment_controller.cpp
#include "payment_controller.hpp"

#include <idem/lease_token.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

namespace payments {
namespace {

nlohmann::json to_json(const payment& p) {
  return {{"id", p.id}, {"amount", p.amount}, {"currency", p.currency}};
}

void answer_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void bad_request(httplib::Response& res, const std::string& detail) {
  res.status = 400;
  res.set_content(nlohmann::json{{"title", "Invalid payment"}, {"status", 400}, {"detail", detail}}.dump(),
                  "application/problem+json");
}

bool is_currency(const std::string& c) {
  if (c.size() != 3) return false;
  for (char ch : c)
    if (ch < 'A' || ch > 'Z') return false;
  return true;
}

}  // namespace

void PaymentController::create(const httplib::Request& req, httplib::Response& res) {
  const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("amount") || !body["amount"].is_number_integer() ||
      !body.contains("currency") || !body["currency"].is_string())
    return bad_request(res, R"(expected {"amount": <int>, "currency": "<code>", "delay_ms": <optional int>})");
  const auto currency = body["currency"].get<std::string>();
  if (!is_currency(currency)) return bad_request(res, "currency must be three capital letters");
  if (body.contains("delay_ms")) {
    if (!body["delay_ms"].is_number_integer() || body["delay_ms"].get<long long>() < 0 ||
        body["delay_ms"].get<long long>() > 60000)
      return bad_request(res, "delay_ms must be an integer in 0..60000");
    // Simulates a slow payment provider, so that a concurrent duplicate can be observed.
    std::this_thread::sleep_for(std::chrono::milliseconds(body["delay_ms"].get<long long>()));
  }
  payment p{"pay_" + idem::lease_token::generate().to_string().substr(0, 12), body["amount"].get<std::int64_t>(),
            currency};
  {
    std::lock_guard lock(mutex_);
    payments_.push_back(p);
  }
  res.set_header("Location", "/payments/" + p.id);
  answer_json(res, 201, to_json(p));
}

void PaymentController::list(const httplib::Request&, httplib::Response& res) const {
  nlohmann::json all = nlohmann::json::array();
  std::lock_guard lock(mutex_);
  for (const auto& p : payments_) all.push_back(to_json(p));
  answer_json(res, 200, {{"count", payments_.size()}, {"payments", all}});
}

void PaymentController::get(const httplib::Request& req, httplib::Response& res) const {
  const std::string id = req.matches[1];
  std::lock_guard lock(mutex_);
  for (const auto& p : payments_)
    if (p.id == id) return answer_json(res, 200, to_json(p));
  res.status = 404;
  res.set_content(nlohmann::json{{"title", "Not found"}, {"status", 404}, {"detail", "no such payment"}}.dump(),
                  "application/problem+json");
}

}  // namespace payments
