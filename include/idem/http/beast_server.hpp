// idem/http/beast_server.hpp — an HTTP/1.1 connection loop on Boost.Beast for guarded routes
// (target idem::beast): what a server needs around guard() so that a slow or hostile client
// cannot starve the others.
//
//   idem::http::beast::router routes;
//   routes.add("POST", "/payments", payments_endpoint, [&](const auto& req) { return create(req); });
//   asio::co_spawn(io, idem::http::beast::serve(acceptor, routes), asio::detached);
//
// An annotated coroutine method is added with route<&C::m>(routes, "POST", "/payments", engine, c).
//
// Each connection is a coroutine, so a connection that sends slowly occupies no thread. Every
// request's head must arrive within limits.head_timeout (else 408, or a silent close for an idle
// keep-alive connection) and stay within max_header_bytes and max_header_count (else 431); its
// body must arrive within body_timeout (else 408) and stay within the route's body limit (else the
// endpoint's 413). An answer given before the body was read closes the connection after a
// lingering drain, so the client still reads it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <idem/http/beast.hpp>
#include <idem/invoke.hpp>

namespace idem::http::beast {

using request_type = boost::beast::http::request<boost::beast::http::string_body>;
// A route's handler: the request, fully read, to the response to write.
using route_handler = std::function<boost::asio::awaitable<response_type>(const request_type&)>;

// Bounds on what one request may take from the server.
struct server_limits {
  std::chrono::milliseconds head_timeout = std::chrono::seconds(10);  // the request line and headers
  std::chrono::milliseconds body_timeout = std::chrono::seconds(30);
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_header_count = 100;
  std::uint64_t max_unguarded_body = 1024 * 1024;  // a route without an endpoint
};

// idem::http::beast::router
//
// Routes by method and path (the target without its query): an exact path, or a prefix given as
// a path ending in '*' ("/payments/*"), the longest prefix winning. Filled before serving, then
// only read: share one between connections.
class router {
 public:
  struct route {
    std::shared_ptr<const endpoint> guarded;  // null: unguarded
    route_handler handler;
  };

  // `handler` runs through guard(*ep, ...): at most once per key.
  void add(std::string_view method, std::string path, std::shared_ptr<const endpoint> ep, route_handler handler) {
    routes_[key(method, path)] = route{std::move(ep), std::move(handler)};
  }
  // `handler` runs for every request.
  void add(std::string_view method, std::string path, route_handler handler) {
    routes_[key(method, path)] = route{nullptr, std::move(handler)};
  }
  [[nodiscard]] const route* find(std::string_view method, std::string_view target) const {
    const std::string wanted = key(method, target.substr(0, target.find('?')));
    if (auto it = routes_.find(wanted); it != routes_.end()) return &it->second;
    const route* best = nullptr;
    std::size_t best_length = 0;
    for (const auto& [k, r] : routes_) {
      if (k.empty() || k.back() != '*') continue;
      const std::string_view prefix = std::string_view(k).substr(0, k.size() - 1);  // "METHOD /path/"
      if (wanted.size() > prefix.size() && wanted.compare(0, prefix.size(), prefix) == 0 && prefix.size() > best_length) {
        best = &r;
        best_length = prefix.size();
      }
    }
    return best;
  }

 private:
  static std::string key(std::string_view method, std::string_view path) {
    std::string k(method);
    k += ' ';
    k += path;
    return k;
  }
  std::map<std::string, route, std::less<>> routes_;
};

// Adds the endpoint method F of `object` (`boost::asio::awaitable<response_type> C::m(const
// request_type&)`, annotated with [[idem::idempotent]]) to `routes` for `method` and `path`, guarded
// with the scope and options of idem::policy<F>, which must say `http_endpoint = true`. `protocol`
// holds the protocol settings. Returns the endpoint, which the route shares. `eng` and `object`
// must outlive the server's use of the route.
template <auto F, class C>
std::shared_ptr<const endpoint> route(router& routes, std::string_view method, std::string path, engine& eng,
                                      C& object, protocol_options protocol = {}) {
  using p = policy<F>;
  static_assert(p::http_endpoint, "idem::http::beast::route needs a policy with http_endpoint = true");
  static_assert(std::is_same_v<std::invoke_result_t<decltype(F), C&, const request_type&>,
                               boost::asio::awaitable<response_type>>,
                "idem::http::beast::route needs boost::asio::awaitable<response_type> C::m(const request_type&)");
  static_cast<void>(p::registered);  // links the generated registration into the program
  auto ep = std::make_shared<const endpoint>(eng, endpoint_options{std::string(p::scope), p::options(),
                                                                   std::move(protocol)});
  routes.add(method, std::move(path), ep, [&object](const request_type& req) { return std::invoke(F, object, req); });
  return ep;
}

namespace detail {

// Closing a socket with unread bytes resets the connection, and the client may lose the answer
// written just before: stop sending, then read and drop what the client still sends, for at most
// a second, before the socket closes.
inline boost::asio::awaitable<void> lingering_close(boost::beast::tcp_stream& stream) {
  boost::beast::error_code ec;
  stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
  stream.expires_after(std::chrono::seconds(1));
  char sink[4096];
  while (!ec)
    co_await stream.async_read_some(boost::asio::buffer(sink),
                                    boost::asio::redirect_error(boost::asio::use_awaitable, ec));
}

// Writes `r` (problem+json from the protocol) and closes the connection.
inline boost::asio::awaitable<void> answer_and_close(boost::beast::tcp_stream& stream, response r, unsigned version) {
  r.headers.push_back({"Connection", "close"});
  response_type out = to_beast(std::move(r), version, false);
  boost::beast::error_code ec;
  stream.expires_after(std::chrono::seconds(10));
  co_await boost::beast::http::async_write(stream, out, boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  if (!ec) co_await lingering_close(stream);
}

// Runs `read` (a callable starting a read on `stream` and returning its awaitable), cancelling it
// when `timeout` passes first; returns true when it did (the read then ends operation_aborted).
// Not the stream's own timeout: that closes the socket, and a 408 could no longer be sent. The
// connection runs on a strand, so the timer's handler and the read never run at once.
template <class Read>
boost::asio::awaitable<bool> within(boost::beast::tcp_stream& stream, std::chrono::milliseconds timeout, Read read) {
  struct watch {
    boost::asio::ip::tcp::socket* socket;
    bool expired = false;
  };
  auto w = std::make_shared<watch>(watch{&stream.socket()});
  boost::asio::steady_timer deadline(stream.get_executor(), timeout);
  deadline.async_wait([w](const boost::system::error_code& e) {
    if (e || w->socket == nullptr) return;
    w->expired = true;
    boost::system::error_code ignored;
    w->socket->cancel(ignored);
  });
  co_await read();
  w->socket = nullptr;  // a handler that runs later touches nothing
  deadline.cancel();
  co_return w->expired;
}

}  // namespace detail

// Serves HTTP/1.1 requests on `stream` one after another until the client closes, a request or
// answer ends the connection, or a limit is passed (see the file comment). `routes` must outlive
// the call.
inline boost::asio::awaitable<void> serve_connection(boost::beast::tcp_stream stream, const router& routes,
                                                     server_limits limits = {}) {
  namespace bhttp = boost::beast::http;
  auto use = [](boost::beast::error_code& ec) { return boost::asio::redirect_error(boost::asio::use_awaitable, ec); };
  boost::beast::flat_buffer buffer;
  for (;;) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(boost::none);  // the route's limit applies once the head says which route
    boost::beast::error_code ec;
    stream.expires_never();
    const bool head_late = co_await detail::within(stream, limits.head_timeout, [&] {
      return bhttp::async_read_header(stream, buffer, parser, use(ec));
    });
    if (head_late) {
      // An idle keep-alive connection just closes; a head that did not finish arriving is a 408.
      if (buffer.size() == 0 && !parser.got_some()) co_return;
      co_return co_await detail::answer_and_close(
          stream, problem(408, "Request timeout", "The request head did not arrive in time."), 11);
    }
    if (ec == bhttp::error::header_limit)
      co_return co_await detail::answer_and_close(
          stream, problem(431, "Request header fields too large", "The request head is too large."), 11);
    if (ec) co_return;
    const unsigned version = parser.get().version();
    if (static_cast<std::size_t>(std::distance(parser.get().begin(), parser.get().end())) > limits.max_header_count)
      co_return co_await detail::answer_and_close(
          stream, problem(431, "Request header fields too large", "The request has too many header fields."),
          version);
    const router::route* r = routes.find(parser.get().method_string(), parser.get().target());
    if (r == nullptr)
      co_return co_await detail::answer_and_close(stream, problem(404, "Not found", "No such route."), version);
    const std::uint64_t limit = r->guarded ? body_limit(*r->guarded) : limits.max_unguarded_body;
    parser.body_limit(limit);
    // A Content-Length over the limit is refused before a body byte is read; a chunked body once
    // it grows past the limit.
    if (parser.content_length() && *parser.content_length() > limit) {
      ec = bhttp::error::body_limit;
    } else if (co_await detail::within(stream, limits.body_timeout,
                                       [&] { return bhttp::async_read(stream, buffer, parser, use(ec)); })) {
      co_return co_await detail::answer_and_close(
          stream, problem(408, "Request timeout", "The request body did not arrive in time."), version);
    }
    if (ec == bhttp::error::body_limit) {
      response too_large =
          r->guarded ? r->guarded->too_large() : problem(413, "Request body too large", "The request body is too large.");
      co_return co_await detail::answer_and_close(stream, std::move(too_large), version);
    }
    if (ec) co_return;
    const request_type& req = parser.get();
    response_type res;
    // Not one conditional expression with a co_await in each branch: g++ 12 miscompiles it.
    if (r->guarded) {
      res = co_await guard(*r->guarded, req, [&] { return r->handler(req); });
    } else {
      res = co_await r->handler(req);
      res.version(req.version());
      res.keep_alive(req.keep_alive() && res.keep_alive());
      res.prepare_payload();
    }
    const bool keep = res.keep_alive();
    stream.expires_after(limits.body_timeout);  // a client that stops reading its answer is let go
    co_await bhttp::async_write(stream, res, use(ec));
    stream.expires_never();
    if (ec || !keep) co_return;
  }
}

// Accepts connections on `acceptor` until it is closed, each served by a coroutine of its own on
// a strand of the acceptor's executor. `routes` must outlive every connection.
inline boost::asio::awaitable<void> serve(boost::asio::ip::tcp::acceptor& acceptor, const router& routes,
                                          server_limits limits = {}) {
  for (;;) {
    boost::beast::error_code ec;
    // Each connection on a strand of its own: its timers and reads never run at once, whatever
    // the number of threads running the io_context.
    auto socket = co_await acceptor.async_accept(boost::asio::make_strand(acceptor.get_executor()),
                                                 boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    if (ec == boost::asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // A connection that failed before it was accepted (reset), or no descriptor left: pause a
      // little rather than spin.
      boost::asio::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(10));
      co_await pause.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      continue;
    }
    socket.set_option(boost::asio::ip::tcp::no_delay(true), ec);
    auto executor = socket.get_executor();
    boost::asio::co_spawn(executor, serve_connection(boost::beast::tcp_stream(std::move(socket)), routes, limits),
                          boost::asio::detached);
  }
}

}  // namespace idem::http::beast
