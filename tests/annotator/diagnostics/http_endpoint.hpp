// HTTP endpoints: a non-static member function with exactly the parameters (const
// httplib::Request&, httplib::Response&). Its key is the Idempotency-Key header, the adapter
// stores the response and it always completes autonomously, so key, codec and completion are
// refused; it must return void; anything else that takes a Request or Response is refused.
#pragma once

#include <string>

#include <httplib.h>

namespace shop {

using Request = httplib::Request;

class Checkout {
 public:
  // Valid: any parameter names, through an alias, with ttl, lease, waitTimeout and a scope.
  // expected-note@+1:11 {{'shop::Checkout::pay' uses scope "Checkout.pay" here}}
  [[idem::idempotent(ttl = "PT1H", lease = "PT30S", waitTimeout = "PT0S")]]
  void pay(const Request& incoming, httplib::Response& outgoing);
  [[idem::idempotent(scope = "Checkout.refund")]] void refund(const httplib::Request&, httplib::Response&);
  // Valid: an endpoint gets no guarded<C> wrapper, so noexcept and final do not matter.
  [[idem::idempotent]] virtual void cancel(const httplib::Request& req, httplib::Response& res) noexcept final;

  // key, codec, completion and transaction are refused at the argument.
  // expected-error@+1:22 {{'key' is not allowed on an HTTP endpoint: its key comes from the Idempotency-Key header}}
  [[idem::idempotent(key = "req.body")]] void a(const httplib::Request& req, httplib::Response& res);
  // expected-error@+1:22 {{'codec' is not allowed on an HTTP endpoint: the HTTP adapter stores and replays the response itself}}
  [[idem::idempotent(codec = "idem::json_codec")]] void b(const httplib::Request& req, httplib::Response& res);
  // expected-error@+1:22 {{'completion' is not allowed on an HTTP endpoint: an HTTP endpoint always completes autonomously}}
  [[idem::idempotent(completion = "autonomous")]] void c(const httplib::Request& req, httplib::Response& res);
  // expected-error@+1:22 {{'transaction' is not allowed on an HTTP endpoint: its server's adapter calls it, and opens no transaction; begin one in the handler}}
  [[idem::idempotent(transaction = "required")]] void c2(const httplib::Request& req, httplib::Response& res);
  // expected-error@+3:22 {{'key' is not allowed on an HTTP endpoint: its key comes from the Idempotency-Key header}}
  // expected-error@+2:33 {{'completion' is not allowed on an HTTP endpoint: an HTTP endpoint always completes autonomously}}
  // expected-error@+1:66 {{'codec' is not allowed on an HTTP endpoint: the HTTP adapter stores and replays the response itself}}
  [[idem::idempotent(key = "1", completion = "join-transaction", codec = "int")]] void d(const httplib::Request& req, httplib::Response& res);
  // An endpoint answers through its Response: it returns void.
  // expected-error@+1:11 {{'shop::Checkout::e' is an HTTP endpoint and returns 'int': an endpoint answers through its httplib::Response, which is what is stored and replayed; return void}}
  [[idem::idempotent]] int e(const httplib::Request& req, httplib::Response& res);
  // Near misses are refused rather than guarded as ordinary functions: static, an extra
  // parameter, Request by value, const Response, swapped, Request only; and a free function.
  // expected-error@+1:11 {{'shop::Checkout::f' has the signature of an HTTP endpoint but is not a non-static member function: idem::http::route<&C::m> calls an endpoint on an object; make it a member function}}
  [[idem::idempotent]] static void f(const httplib::Request& req, httplib::Response& res);
  // expected-error@+1:11 {{'shop::Checkout::g' takes an httplib::Request or httplib::Response but is not an HTTP endpoint, which is a non-static member function with exactly the parameters (const httplib::Request&, httplib::Response&); give it these parameters, or give it what its key needs instead of the request}}
  [[idem::idempotent(key = "id")]] void g(const httplib::Request& req, httplib::Response& res, int id);
  // expected-error@+1:11 {{'shop::Checkout::h' takes an httplib::Request or httplib::Response but is not an HTTP endpoint, which is a non-static member function with exactly the parameters (const httplib::Request&, httplib::Response&); give it these parameters, or give it what its key needs instead of the request}}
  [[idem::idempotent(key = "req.body")]] void h(httplib::Request req, httplib::Response& res);
  // expected-error@+1:11 {{'shop::Checkout::i' takes an httplib::Request or httplib::Response but is not an HTTP endpoint, which is a non-static member function with exactly the parameters (const httplib::Request&, httplib::Response&); give it these parameters, or give it what its key needs instead of the request}}
  [[idem::idempotent]] void i(const httplib::Request& req, const httplib::Response& res);
  // expected-error@+1:11 {{'shop::Checkout::j' takes an httplib::Request or httplib::Response but is not an HTTP endpoint, which is a non-static member function with exactly the parameters (const httplib::Request&, httplib::Response&); give it these parameters, or give it what its key needs instead of the request}}
  [[idem::idempotent]] void j(httplib::Response& res, const httplib::Request& req);
  // expected-error@+1:11 {{'shop::Checkout::k' takes an httplib::Request or httplib::Response but is not an HTTP endpoint, which is a non-static member function with exactly the parameters (const httplib::Request&, httplib::Response&); give it these parameters, or give it what its key needs instead of the request}}
  [[idem::idempotent(key = "req.body")]] void k(const httplib::Request& req);
};

// expected-error@+1:9 {{'shop::handle' has the signature of an HTTP endpoint but is not a non-static member function: idem::http::route<&C::m> calls an endpoint on an object; make it a member function}}
[[idem::idempotent]] void handle(const httplib::Request& req, httplib::Response& res);

// The scope rules apply as to any function: two classes named Checkout default to Checkout.pay.
namespace legacy {
class Checkout {
 public:
  // expected-error@+1:11 {{the default scope "Checkout.pay" of 'shop::legacy::Checkout::pay' is also the default scope of 'shop::Checkout::pay': they would share records, so that after one runs for a key the other is skipped for that key; set scope = "..." on one of them}}
  [[idem::idempotent]] void pay(const httplib::Request& req, httplib::Response& res);
};
}  // namespace legacy

}  // namespace shop
