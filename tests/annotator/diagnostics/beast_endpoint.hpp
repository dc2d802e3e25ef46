// Boost.Beast HTTP endpoints: a non-static member coroutine with exactly the signature
// boost::asio::awaitable<response_type>(const request_type&) (idem::http::beast's string-bodied
// request and response, Asio's default executor), which idem::http::beast::route<&C::m> adds to a
// router. Its key is the Idempotency-Key header, the adapter stores the response and it always
// completes autonomously, so key, codec and completion are refused; anything else that takes a
// Beast request or response is refused too.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/dynamic_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace shop {

namespace http = boost::beast::http;
using request = http::request<http::string_body>;
using response = http::response<http::string_body>;

class Orders {
 public:
  // Valid: spelled through aliases or in full, any parameter name, with ttl, lease, waitTimeout and
  // a scope; const or not.
  // expected-note@+1:11 {{'shop::Orders::place' uses scope "Orders.place" here}}
  [[idem::idempotent(ttl = "PT1H", lease = "PT30S", waitTimeout = "PT0S")]]
  boost::asio::awaitable<response> place(const request& incoming);
  [[idem::idempotent(scope = "Orders.amend")]]
  boost::asio::awaitable<boost::beast::http::response<boost::beast::http::string_body>> amend(
      const boost::beast::http::request<boost::beast::http::string_body>&) const;
  // Valid: an endpoint gets no guarded<C> wrapper, so noexcept and final do not matter.
  [[idem::idempotent]] virtual boost::asio::awaitable<response> cancel(const request& req) noexcept final;

  // key, codec, completion and transaction are refused at the argument.
  // expected-error@+1:22 {{'key' is not allowed on an HTTP endpoint: its key comes from the Idempotency-Key header}}
  [[idem::idempotent(key = "req.body()")]] boost::asio::awaitable<response> a(const request& req);
  // expected-error@+1:22 {{'codec' is not allowed on an HTTP endpoint: the HTTP adapter stores and replays the response itself}}
  [[idem::idempotent(codec = "idem::json_codec")]] boost::asio::awaitable<response> b(const request& req);
  // expected-error@+1:22 {{'completion' is not allowed on an HTTP endpoint: an HTTP endpoint always completes autonomously}}
  [[idem::idempotent(completion = "join-transaction")]] boost::asio::awaitable<response> c(const request& req);
  // expected-error@+1:22 {{'transaction' is not allowed on an HTTP endpoint: its server's adapter calls it, and opens no transaction; begin one in the handler}}
  [[idem::idempotent(transaction = "required")]] boost::asio::awaitable<response> c2(const request& req);

  // Near misses are refused rather than guarded as ordinary functions: not a coroutine, a coroutine
  // of something else, the request by value or not const, another body, another executor, an extra
  // parameter, the response as a parameter; static; and a free function.
  // expected-error@+1:11 {{'shop::Orders::d' takes a Boost.Beast request or response but is not an HTTP endpoint, which is a non-static member function with exactly the signature boost::asio::awaitable<idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this signature, or give it what its key needs instead of the request}}
  [[idem::idempotent]] response d(const request& req);
  // expected-error@+1:11 {{'shop::Orders::e' takes a Boost.Beast request or response but is not an HTTP endpoint, which is a non-static member function with exactly the signature boost::asio::awaitable<idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this signature, or give it what its key needs instead of the request}}
  [[idem::idempotent]] boost::asio::awaitable<int> e(const request& req);
  // expected-error@+1:11 {{'shop::Orders::f' takes a Boost.Beast request or response but is not an HTTP endpoint, which is a non-static member function with exactly the signature boost::asio::awaitable<idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this signature, or give it what its key needs instead of the request}}
  [[idem::idempotent]] boost::asio::awaitable<response> f(request req);
  // expected-error@+1:11 {{'shop::Orders::g' takes a Boost.Beast request or response but is not an HTTP endpoint, which is a non-static member function with exactly the signature boost::asio::awaitable<idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this signature, or give it what its key needs instead of the request}}
  [[idem::idempotent]] boost::asio::awaitable<response> g(request& req);
  // expected-error@+1:11 {{'shop::Orders::h' takes a Boost.Beast request or response but is not an HTTP endpoint, which is a non-static member function with exactly the signature boost::asio::awaitable<idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this signature, or give it what its key needs instead of the request}}
  [[idem::idempotent]] boost::asio::awaitable<response> h(const http::request<http::dynamic_body>& req);
  // expected-error@+1:11 {{'shop::Orders::i' takes a Boost.Beast request or response but is not an HTTP endpoint, which is a non-static member function with exactly the signature boost::asio::awaitable<idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this signature, or give it what its key needs instead of the request}}
  [[idem::idempotent]] boost::asio::awaitable<response, boost::asio::io_context::executor_type> i(const request& req);
  // expected-error@+1:11 {{'shop::Orders::j' takes a Boost.Beast request or response but is not an HTTP endpoint, which is a non-static member function with exactly the signature boost::asio::awaitable<idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this signature, or give it what its key needs instead of the request}}
  [[idem::idempotent(key = "id")]] boost::asio::awaitable<response> j(const request& req, int id);
  // expected-error@+1:11 {{'shop::Orders::k' takes a Boost.Beast request or response but is not an HTTP endpoint, which is a non-static member function with exactly the signature boost::asio::awaitable<idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this signature, or give it what its key needs instead of the request}}
  [[idem::idempotent]] boost::asio::awaitable<void> k(const request& req, response& res);
  // expected-error@+1:11 {{'shop::Orders::l' has the signature of an HTTP endpoint but is not a non-static member function: idem::http::beast::route<&C::m> calls an endpoint on an object; make it a member function}}
  [[idem::idempotent]] static boost::asio::awaitable<response> l(const request& req);
};

// expected-error@+1:9 {{'shop::handle' has the signature of an HTTP endpoint but is not a non-static member function: idem::http::beast::route<&C::m> calls an endpoint on an object; make it a member function}}
[[idem::idempotent]] boost::asio::awaitable<response> handle(const request& req);

// A coroutine that returns a Beast response but takes no Beast request is an ordinary coroutine
// method, keyed by an expression; a response needs a codec like any value (shown as the compiler
// names the type, aliases resolved).
struct Event {
  long id;
};
struct Mailer {
  // expected-error@+1:11 {{'shop::Mailer::send' produces 'boost::beast::http::message<false, boost::beast::http::basic_string_body<char, std::char_traits<char>, std::allocator<char>>, boost::beast::http::basic_fields<std::allocator<char>>>', so a duplicate call must be given that value back: name a codec that encodes it, for example codec = "idem::json_codec"}}
  [[idem::idempotent(key = "event.id")]] boost::asio::awaitable<response> send(const Event& event);
};

// The scope rules apply as to any function: two classes named Orders default to Orders.place.
namespace legacy {
class Orders {
 public:
  // expected-error@+1:11 {{the default scope "Orders.place" of 'shop::legacy::Orders::place' is also the default scope of 'shop::Orders::place': they would share records, so that after one runs for a key the other is skipped for that key; set scope = "..." on one of them}}
  [[idem::idempotent]] boost::asio::awaitable<response> place(const request& req);
};
}  // namespace legacy

}  // namespace shop
