// idem/http/httplib.hpp — guarding cpp-httplib routes with idem.
//
//   class PaymentController {
//    public:
//     [[idem::idempotent(waitTimeout = "PT0S")]]
//     void create(const httplib::Request& req, httplib::Response& res);
//   };
//   idem::http::route<&PaymentController::create>(server, "POST", "/payments", engine, controller);
//
// route<F> reads scope and options from idem::policy<F> (generated, or written by hand: see
// docs/http.md); guard() takes them explicitly. Both register one handler on the server that
// reads the body itself (at most the limit + 1 bytes) and runs the protocol of
// <idem/http/endpoint.hpp>.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <httplib.h>

#include <idem/http/endpoint.hpp>
#include <idem/invoke.hpp>

namespace idem::http {

// A cpp-httplib handler.
using httplib_handler = std::function<void(const httplib::Request&, httplib::Response&)>;

// Bounds on what clients may take from a cpp-httplib server (apply_limits). cpp-httplib serves
// each connection on a thread of its pool for as long as it is open, and bounds each read, not a
// request: a client that sends its head a line at a time, each within the read timeout (5 s),
// holds its thread for as long as it likes. `threads` is how many such clients the server
// survives; Boost.Beast's server has no such limit (<idem/http/beast_server.hpp>).
struct httplib_limits {
  std::size_t threads = 256;          // connections served at once
  std::size_t keep_alive_max = 10000;  // requests on one connection before the server closes it
  std::size_t max_header_count = 100;  // header fields in a request; more is answered 431
};

// Sets on `server`, before it listens: a pool of limits.threads threads, TCP_NODELAY (no Nagle
// delay between a response's head and body), limits.keep_alive_max (cpp-httplib's default of 5
// makes every client reconnect after its fifth request), and a pre-routing handler that answers a
// request with more than limits.max_header_count fields 431 and closes its connection (the fields
// have been read by then: cpp-httplib caps each line at 8 KiB, not their number). Replaces the
// server's task queue and pre-routing handler. Throws configuration_error for a zero limit.
void apply_limits(httplib::Server& server, const httplib_limits& limits = {});

// Registers `handler` for `method` ("POST", "PUT", "PATCH", "DELETE" or "GET") and `pattern` on
// `server`, guarded by an endpoint built from `options` (validated now: configuration_error).
// Returns the endpoint, which the server's handler shares. The engine must outlive the server's
// use of the route. A handler must answer with a body (set_content), not a content provider.
std::shared_ptr<const endpoint> guard(httplib::Server& server, std::string_view method, std::string pattern,
                                      engine& eng, endpoint_options options, httplib_handler handler);

// Registers the endpoint method F of `object` (`void C::m(const httplib::Request&,
// httplib::Response&)`) with the scope and options of idem::policy<F>, which must say
// `http_endpoint = true`. `protocol` holds the protocol settings (shared defaults, or this
// endpoint's). `object` must outlive the server's use of the route.
template <auto F, class C>
std::shared_ptr<const endpoint> route(httplib::Server& server, std::string_view method, std::string pattern,
                                      engine& eng, C& object, protocol_options protocol = {}) {
  using p = policy<F>;
  static_assert(p::http_endpoint, "idem::http::route needs a policy with http_endpoint = true");
  static_cast<void>(p::registered);  // links the generated registration into the program
  endpoint_options options{std::string(p::scope), p::options(), std::move(protocol)};
  return guard(server, method, std::move(pattern), eng, std::move(options),
               [&object](const httplib::Request& req, httplib::Response& res) { std::invoke(F, object, req, res); });
}

}  // namespace idem::http
