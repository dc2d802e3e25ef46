// tests/http/http_test_support.hpp — a real cpp-httplib server on 127.0.0.1 and a free port,
// started and stopped by RAII, and small helpers for its answers.
#pragma once

#include <catch2/catch.hpp>

#include <httplib.h>

#include <idem/http/httplib.hpp>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string_view>
#include <utility>
#include <string>
#include <thread>

namespace idem::http_test {

// A client of a test server on 127.0.0.1:`port`, with bounded timeouts.
inline httplib::Client client_of(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(std::chrono::seconds(10));
  c.set_tcp_nodelay(true);
  c.set_read_timeout(std::chrono::seconds(30));
  c.set_write_timeout(std::chrono::seconds(30));
  return c;
}

// A server listening on 127.0.0.1 with 64 worker threads (so that 20 concurrent duplicates all
// reach the store at once). Register routes on `server`, then start(). Stops in the destructor.
class test_server {
 public:
  test_server() {
    server.new_task_queue = [] { return new httplib::ThreadPool(64); };
    server.set_tcp_nodelay(true);  // no Nagle delay between the header and body writes
    server.set_socket_options([this](socket_t sock) {
      httplib::default_socket_options(sock);
      listener_ = sock;
    });
  }
  ~test_server() {
    server.stop();
    if (thread_.joinable()) thread_.join();
  }
  test_server(const test_server&) = delete;
  test_server& operator=(const test_server&) = delete;

  // Binds a free port (fails the test if it cannot) and serves on a thread of its own. The
  // socket listens once bind returns, so clients may connect at once.
  void start() {
    port_ = server.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    // cpp-httplib 0.11 listens with a backlog of 5: a burst of 20 connects would see SYNs dropped
    // and retried a second or more later. listen() again only raises the backlog.
    REQUIRE(::listen(listener_, 128) == 0);
    thread_ = std::thread([this] { server.listen_after_bind(); });
  }

  // A client with bounded timeouts.
  httplib::Client client() const { return client_of(port_); }

  // start(), then a client of it: what most cases begin with.
  httplib::Client serve() {
    start();
    return client();
  }

  int port() const noexcept { return port_; }

  httplib::Server server;

 private:
  int port_ = 0;
  socket_t listener_ = INVALID_SOCKET;
  std::thread thread_;
};

// The cpp-httplib server as the case table drives it (the Beast one: beast_test_server.hpp):
// guard() registers a guarded route.
class httplib_test_server : public test_server {
 public:
  std::shared_ptr<const idem::http::endpoint> guard(std::string_view method, std::string pattern, idem::engine& eng,
                                                    idem::http::endpoint_options options,
                                                    idem::http::httplib_handler handler) {
    return idem::http::guard(server, method, std::move(pattern), eng, std::move(options), std::move(handler));
  }
};

// A request header set with the idempotency key.
inline httplib::Headers key_header(const std::string& value, const std::string& name = "Idempotency-Key") {
  return httplib::Headers{{name, value}};
}

// Every header of `res` as "name: value" lines in order, and the body: what "byte-identical" compares.
inline std::string wire_form(const httplib::Response& res, bool drop_replay_marker = true) {
  std::string out = std::to_string(res.status) + "\n";
  for (const auto& [name, value] : res.headers) {
    if (drop_replay_marker && name == "Idempotent-Replayed") continue;
    if (name == "Keep-Alive" || name == "Connection") continue;  // the connection's, not the response's
    out += name + ": " + value + "\n";
  }
  return out + "\n" + res.body;
}

}  // namespace idem::http_test
