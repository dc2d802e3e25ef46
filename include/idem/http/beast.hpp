// idem/http/beast.hpp — guarding Boost.Beast request handlers with idem, asynchronously (target
// idem::beast, CMake component `beast`: idem::http plus Boost's headers).
//
//   idem::http::endpoint payments{engine, {.scope = "Payments.create"}};
//   ...
//   http::request_parser<http::string_body> parser;
//   parser.body_limit(idem::http::beast::body_limit(payments));   // a larger body: answer too_large()
//   co_await http::async_read(stream, buffer, parser, asio::use_awaitable);
//   auto res = co_await idem::http::beast::guard(payments, parser.get(), [&]() -> asio::awaitable<response> {
//     co_return co_await create_payment(parser.get());            // runs at most once per key
//   });
//   co_await http::async_write(stream, res, asio::use_awaitable);
//
// The protocol is <idem/http/endpoint.hpp>'s, the same as the cpp-httplib adapter's: this file
// only converts Beast's request and response types and suspends instead of blocking
// (endpoint::async_run: a duplicate waits inside the store, no thread parked for it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <idem/http/endpoint.hpp>

namespace idem::http::beast {

// What guard() answers with, and what a guarded handler produces.
using response_type = boost::beast::http::response<boost::beast::http::string_body>;

// The body limit to give Beast's request parser for `ep` (parser.body_limit): a larger body fails
// the read with http::error::body_limit, and the server then answers ep.too_large() and closes
// the connection (the rest of the body was never read).
[[nodiscard]] inline std::uint64_t body_limit(const endpoint& ep) noexcept { return ep.max_body_bytes(); }

namespace detail {

// request_view over a Beast request.
template <class Fields>
class request_view final : public http::request_view {
 public:
  explicit request_view(const boost::beast::http::request<boost::beast::http::string_body, Fields>& r) : r_(r) {}
  std::string_view method() const noexcept override { return r_.method_string(); }
  std::string_view target() const noexcept override { return r_.target(); }
  std::string_view body() const noexcept override { return r_.body(); }
  std::vector<std::string_view> header(std::string_view name) const override {
    std::vector<std::string_view> values;
    auto [first, last] = r_.equal_range(name);  // Beast compares names case-insensitively
    for (auto it = first; it != last; ++it) values.emplace_back(it->value());
    return values;
  }

 private:
  const boost::beast::http::request<boost::beast::http::string_body, Fields>& r_;
};

// The handler's Beast response as idem stores it: status, the fields in order, the body.
inline response from_beast(response_type&& r) {
  response out;
  out.status = static_cast<int>(r.result_int());
  for (const auto& field : r) out.headers.push_back({std::string(field.name_string()), std::string(field.value())});
  out.body = std::move(r.body());
  return out;
}

// An idem response as Beast writes it, for a request of HTTP `version` that wants `keep_alive`.
inline response_type to_beast(response r, unsigned version, bool keep_alive) {
  response_type out{static_cast<boost::beast::http::status>(r.status), version};
  for (auto& h : r.headers) out.insert(h.name, h.value);
  out.body() = std::move(r.body);
  out.keep_alive(keep_alive);
  out.prepare_payload();
  return out;
}

}  // namespace detail

// Answers `request` through `ep`: rejected by the protocol (400, 413), passed through unguarded
// (no key and none required), or run at most once per key — `handler` (a callable returning
// boost::asio::awaitable<response_type>) runs as a child coroutine on the caller's executor, and
// duplicates get the stored response byte for byte with `Idempotent-Replayed: true`, 422 for a
// different request with the same key, or the in-flight status with Retry-After; a handler that
// throws answers 500 and releases its record, a 5xx is released unless stored by the options. Never
// throws for a request. The response carries the request's version and keep-alive and a
// Content-Length; write it as is. `request` and whatever `handler` uses must outlive the await.
template <class Fields, class Handler>
boost::asio::awaitable<response_type> guard(
    const endpoint& ep, const boost::beast::http::request<boost::beast::http::string_body, Fields>& request,
    Handler handler) {
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  const detail::request_view<Fields> view{request};
  decision d = ep.admit(view);
  if (std::holds_alternative<pass_through>(d)) co_return co_await handler();
  if (auto* reject = std::get_if<response>(&d)) co_return detail::to_beast(std::move(*reject), version, keep_alive);
  if (request.body().size() > ep.max_body_bytes()) co_return detail::to_beast(ep.too_large(), version, keep_alive);

  const auto executor = co_await boost::asio::this_coro::executor;
  response answer = co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable), void(response)>(
      [&](auto completion) {
        // Resumes the caller on its executor, whichever thread the last step ended on.
        auto resume = std::make_shared<decltype(completion)>(std::move(completion));
        ep.async_run(
            std::get<claim>(d), view,
            [executor, handler](endpoint::response_callback answered) {
              boost::asio::co_spawn(executor, handler(),
                                    [answered = std::move(answered)](std::exception_ptr error, response_type r) {
                                      if (error) return answered(std::move(error), response{});
                                      answered(nullptr, detail::from_beast(std::move(r)));
                                    });
            },
            [resume, executor](response r) {
              auto target = boost::asio::get_associated_executor(*resume, executor);
              boost::asio::post(target, [resume, r = std::move(r)]() mutable { (*resume)(std::move(r)); });
            });
      },
      boost::asio::use_awaitable);
  co_return detail::to_beast(std::move(answer), version, keep_alive);
}

}  // namespace idem::http::beast
