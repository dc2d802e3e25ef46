// tests/http/http_test_support.hpp — a real cpp-httplib server on 127.0.0.1 and a free port,
// started and stopped by RAII, and small helpers for its answers.
#pragma once

#include <catch2/catch.hpp>

#include <httplib.h>

#include <idem/http/httplib.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
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

// A plain client socket, connected to the server (closed when it goes).
class raw_socket {
 public:
  explicit raw_socket(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    timeval timeout{20, 0};  // a bound: a server that never answers fails the case
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  ~raw_socket() { ::close(fd_); }
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;

  void send(const std::string& bytes) {
    REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
  }
  // The answer's head (up to the blank line), or what came before the connection ended.
  std::string head() {
    std::string answer;
    char buffer[4096];
    while (answer.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      answer.append(buffer, static_cast<std::size_t>(n));
    }
    return answer;
  }
  // Whether the server closed the connection: the next read ends it, within the bound (a
  // server that keeps it open fails the check after 20 s, not the test run).
  bool closed() {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      if (n < 0) return false;  // the bound passed, or another error
    }
  }

 private:
  int fd_;
};

// A server listening on 127.0.0.1 with apply_limits (by default 64 worker threads, so that 20
// concurrent duplicates all reach the store at once). Register routes on `server`, then start().
// Stops in the destructor.
class test_server {
 public:
  explicit test_server(idem::http::httplib_limits limits = {.threads = 64}) {
    idem::http::apply_limits(server, limits);
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
  using test_server::test_server;
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
