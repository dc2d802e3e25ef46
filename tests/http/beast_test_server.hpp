// tests/http/beast_test_server.hpp — a real Boost.Beast server on 127.0.0.1 and a free port, whose
// routes are guarded with <idem/http/beast.hpp>: what the case table runs against beside the
// cpp-httplib server. Handlers are written once, in cpp-httplib's form (they fill an
// httplib::Response), and converted here, so that every case means the same on both servers.
#pragma once

#include <catch2/catch.hpp>

#include <httplib.h>

#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <idem/errors.hpp>
#include <idem/http/beast.hpp>
#include <idem/http/httplib.hpp>

namespace idem::http_test {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

class beast_test_server {
 public:
  beast_test_server() = default;
  ~beast_test_server() {
    io_.stop();
    for (auto& t : threads_) t.join();
  }
  beast_test_server(const beast_test_server&) = delete;
  beast_test_server& operator=(const beast_test_server&) = delete;

  // Registers `handler` for `method` and the exact path `pattern`, guarded by an endpoint built
  // from `options` (configuration_error as idem::http::guard throws it).
  std::shared_ptr<const idem::http::endpoint> guard(std::string_view method, std::string pattern, idem::engine& eng,
                                                    idem::http::endpoint_options options,
                                                    idem::http::httplib_handler handler) {
    if (!handler) throw idem::configuration_error("beast_test_server::guard: the handler is empty");
    auto ep = std::make_shared<const idem::http::endpoint>(eng, std::move(options));
    if (method != "POST" && method != "PUT" && method != "PATCH" && method != "DELETE" && method != "GET")
      throw idem::configuration_error("beast_test_server::guard: method \"" + std::string(method) +
                                      "\" is not one of POST, PUT, PATCH, DELETE, GET");
    routes_[std::string(method) + " " + pattern] = route{ep, std::move(handler)};
    return ep;
  }

  // Binds a free port and serves on 64 threads (so that 20 concurrent duplicates whose handler
  // blocks all reach the store at once, as on the cpp-httplib server).
  void start() {
    acceptor_.open(boost::asio::ip::tcp::v4());
    acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
    acceptor_.bind({boost::asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen(128);
    port_ = acceptor_.local_endpoint().port();
    REQUIRE(port_ > 0);
    boost::asio::co_spawn(io_, accept_loop(), boost::asio::detached);
    for (int i = 0; i < 64; ++i) threads_.emplace_back([this] { io_.run(); });
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(std::chrono::seconds(10));
    c.set_tcp_nodelay(true);
    c.set_read_timeout(std::chrono::seconds(30));
    c.set_write_timeout(std::chrono::seconds(30));
    return c;
  }

  httplib::Client serve() {
    start();
    return client();
  }

  int port() const noexcept { return port_; }

 private:
  using request_type = bhttp::request<bhttp::string_body>;
  using response_type = idem::http::beast::response_type;

  struct route {
    std::shared_ptr<const idem::http::endpoint> ep;
    idem::http::httplib_handler handler;
  };

  boost::asio::awaitable<void> accept_loop() {
    for (;;) {
      auto socket = co_await acceptor_.async_accept(boost::asio::use_awaitable);
      socket.set_option(boost::asio::ip::tcp::no_delay(true));
      boost::asio::co_spawn(acceptor_.get_executor(), session(beast::tcp_stream(std::move(socket))),
                            boost::asio::detached);
    }
  }

  // One connection: the head first, so that the route's body limit applies while the body is read.
  boost::asio::awaitable<void> session(beast::tcp_stream stream) {
    beast::flat_buffer buffer;
    for (;;) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.body_limit(boost::none);  // the route's limit applies, once the head says which route
      beast::error_code ec;
      co_await bhttp::async_read_header(stream, buffer, parser,
                                        boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      if (ec) co_return;
      const std::string target(parser.get().target());
      const std::string path = target.substr(0, target.find('?'));
      auto found = routes_.find(std::string(parser.get().method_string()) + " " + path);
      if (found == routes_.end()) {
        response_type missing{bhttp::status::not_found, parser.get().version()};
        missing.keep_alive(false);
        missing.prepare_payload();
        co_await bhttp::async_write(stream, missing, boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        co_return;
      }
      const route& r = found->second;
      const std::uint64_t limit = idem::http::beast::body_limit(*r.ep);
      parser.body_limit(limit);
      // A Content-Length over the limit is refused before a body byte is read; a chunked body
      // once it grows past it.
      if (parser.content_length() && *parser.content_length() > limit) {
        ec = bhttp::error::body_limit;
      } else {
        co_await bhttp::async_read(stream, buffer, parser, boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      }
      if (ec == bhttp::error::body_limit) {
        // The rest of the body was never read: the connection cannot carry another request.
        idem::http::response too_large = r.ep->too_large();
        too_large.headers.push_back({"Connection", "close"});
        response_type answer = idem::http::beast::detail::to_beast(std::move(too_large), parser.get().version(), false);
        co_await bhttp::async_write(stream, answer, boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        co_await lingering_close(stream);
        co_return;
      }
      if (ec) co_return;
      const request_type& req = parser.get();
      response_type res = co_await idem::http::beast::guard(*r.ep, req, [&]() -> boost::asio::awaitable<response_type> {
        co_return run_handler(r.handler, req);
      });
      const bool keep = res.keep_alive();
      co_await bhttp::async_write(stream, res, boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      if (ec || !keep) co_return;
    }
  }

  // Closing a socket with unread bytes resets the connection, and the client may lose the answer
  // written just before: stop sending, then read and drop what the client still sends, for at
  // most a second, before closing.
  static boost::asio::awaitable<void> lingering_close(beast::tcp_stream& stream) {
    beast::error_code ec;
    stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
    stream.expires_after(std::chrono::seconds(1));
    char sink[4096];
    while (!ec)
      co_await stream.async_read_some(boost::asio::buffer(sink), boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }

  // Runs a cpp-httplib-style handler on a Beast request and converts its answer.
  static response_type run_handler(const idem::http::httplib_handler& handler, const request_type& req) {
    httplib::Request in;
    in.method = std::string(req.method_string());
    in.target = std::string(req.target());
    in.path = in.target.substr(0, in.target.find('?'));
    in.body = req.body();
    for (const auto& field : req) in.headers.emplace(std::string(field.name_string()), std::string(field.value()));
    httplib::Response out;
    handler(in, out);
    if (out.content_provider_) throw std::logic_error("the Beast test server cannot stream an answer");
    response_type res{static_cast<bhttp::status>(out.status == -1 ? 200 : out.status), req.version()};
    for (const auto& [name, value] : out.headers) res.insert(name, value);
    res.body() = std::move(out.body);
    res.prepare_payload();
    return res;
  }

  std::map<std::string, route> routes_;  // "METHOD /path"; filled before start()
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  std::vector<std::thread> threads_;
  int port_ = 0;
};

}  // namespace idem::http_test
