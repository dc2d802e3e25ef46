// tests/http/beast_test_server.hpp — a real Boost.Beast server on 127.0.0.1 and a free port
// (<idem/http/beast_server.hpp>), whose routes are guarded with <idem/http/beast.hpp>: what the
// case table runs against beside the cpp-httplib server. Handlers are written once, in cpp-httplib's form (they fill an
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
#include <idem/http/beast_server.hpp>
#include <idem/http/httplib.hpp>

#include "http_test_support.hpp"

namespace idem::http_test {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

class beast_test_server {
 public:
  // `threads` run the io_context; `limits` bound what one request may take.
  explicit beast_test_server(int threads = 64, idem::http::beast::server_limits limits = {})
      : thread_count_(threads), limits_(limits) {}
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
    routes_.add(method, std::move(pattern), ep,
                [handler = std::move(handler)](const request_type& req) -> boost::asio::awaitable<response_type> {
                  co_return run_handler(handler, req);
                });
    return ep;
  }

  // The router, to add routes of other shapes (idem::http::beast::route<&C::m>) before start().
  idem::http::beast::router& routes() noexcept { return routes_; }

  // Binds a free port and serves on the threads (64 by default, so that 20 concurrent duplicates
  // whose handler blocks all reach the store at once, as on the cpp-httplib server).
  void start() {
    acceptor_.open(boost::asio::ip::tcp::v4());
    acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
    acceptor_.bind({boost::asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen(128);
    port_ = acceptor_.local_endpoint().port();
    REQUIRE(port_ > 0);
    boost::asio::co_spawn(io_, idem::http::beast::serve(acceptor_, routes_, limits_), boost::asio::detached);
    for (int i = 0; i < thread_count_; ++i) threads_.emplace_back([this] { io_.run(); });
  }

  httplib::Client client() const { return client_of(port_); }

  httplib::Client serve() {
    start();
    return client();
  }

  int port() const noexcept { return port_; }

 private:
  using request_type = idem::http::beast::request_type;
  using response_type = idem::http::beast::response_type;

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

  const int thread_count_;
  const idem::http::beast::server_limits limits_;
  idem::http::beast::router routes_;  // filled before start()
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  std::vector<std::thread> threads_;
  int port_ = 0;
};

}  // namespace idem::http_test
