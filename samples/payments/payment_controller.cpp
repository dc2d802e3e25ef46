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

reply json_reply(int status, const nlohmann::json& body) { return {status, "application/json", body.dump(), {}}; }

reply problem_reply(int status, const std::string& title, const std::string& detail) {
  return {status, "application/problem+json",
          nlohmann::json{{"title", title}, {"status", status}, {"detail", detail}}.dump(),
          {}};
}

reply bad_request(const std::string& detail) { return problem_reply(400, "Invalid payment", detail); }

bool is_currency(const std::string& c) {
  if (c.size() != 3) return false;
  for (char ch : c)
    if (ch < 'A' || ch > 'Z') return false;
  return true;
}

void write(httplib::Response& res, const reply& r) {
  res.status = r.status;
  if (!r.location.empty()) res.set_header("Location", r.location);
  res.set_content(r.body, r.content_type);
}

}  // namespace

std::variant<order, reply> PaymentController::read_order(std::string_view text) {
  const nlohmann::json body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("amount") || !body["amount"].is_number_integer() ||
      !body.contains("currency") || !body["currency"].is_string())
    return bad_request(R"(expected {"amount": <int>, "currency": "<code>", "delay_ms": <optional int>})");
  order o;
  o.amount = body["amount"].get<std::int64_t>();
  o.currency = body["currency"].get<std::string>();
  if (!is_currency(o.currency)) return bad_request("currency must be three capital letters");
  if (body.contains("delay_ms")) {
    if (!body["delay_ms"].is_number_integer() || body["delay_ms"].get<long long>() < 0 ||
        body["delay_ms"].get<long long>() > 60000)
      return bad_request("delay_ms must be an integer in 0..60000");
    // Simulates a slow payment provider, so that a concurrent duplicate can be observed.
    o.delay = std::chrono::milliseconds(body["delay_ms"].get<long long>());
  }
  return o;
}

reply PaymentController::place(const order& o) {
  payment p{"pay_" + idem::lease_token::generate().to_string().substr(0, 12), o.amount, o.currency};
  {
    std::lock_guard lock(mutex_);
    payments_.push_back(p);
  }
  reply r = json_reply(201, to_json(p));
  r.location = "/payments/" + p.id;
  return r;
}

reply PaymentController::listing() const {
  nlohmann::json all = nlohmann::json::array();
  std::lock_guard lock(mutex_);
  for (const auto& p : payments_) all.push_back(to_json(p));
  return json_reply(200, {{"count", payments_.size()}, {"payments", all}});
}

reply PaymentController::find(std::string_view id) const {
  std::lock_guard lock(mutex_);
  for (const auto& p : payments_)
    if (p.id == id) return json_reply(200, to_json(p));
  return problem_reply(404, "Not found", "no such payment");
}

void PaymentController::create(const httplib::Request& req, httplib::Response& res) {
  auto read = read_order(req.body);
  if (auto* refused = std::get_if<reply>(&read)) return write(res, *refused);
  const order& o = std::get<order>(read);
  std::this_thread::sleep_for(o.delay);  // this server has a thread per request to spare
  write(res, place(o));
}

void PaymentController::list(const httplib::Request&, httplib::Response& res) const { write(res, listing()); }

void PaymentController::get(const httplib::Request& req, httplib::Response& res) const {
  write(res, find(req.matches[1].str()));
}

}  // namespace payments
