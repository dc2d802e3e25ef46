// tests/http/http_slow_client_test.cpp — a slow or hostile client cannot starve the others, on
// both servers as they are deployed (cpp-httplib with apply_limits' defaults, 256 workers; Beast on
// ONE io_context thread): heads dripped a line at a time do not keep a normal request from its
// answer; too many header fields are answered 431, and an answer given before the body was read
// closes the connection even when the client asked to keep it. Then what only one server has: the
// Beast server's head deadline (408), apply_limits' refusals. Real sockets on 127.0.0.1.
#include "http_servers.hpp"

#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/memory_store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using idem::http_test::key_header;
using idem::http_test::raw_socket;
#ifdef IDEM_TEST_BEAST
using idem::http_test::beast_test_server;
#endif
using idem::http_test::httplib_test_server;

namespace {

// A server of kind `Server`, built from `server_args`, with one guarded route, POST /things, whose
// endpoint takes bodies of at most 16 bytes.
template <class Server>
struct client_rig {
  template <class... ServerArgs>
  explicit client_rig(ServerArgs&&... server_args) : http(std::forward<ServerArgs>(server_args)...) {
    http.guard("POST", "/things", engine, {"Test.slow", {}, {.max_body_bytes = 16, .log = nullptr}},
               [this](const httplib::Request&, httplib::Response& res) {
                 res.status = 201;
                 res.set_content("run " + std::to_string(++runs), "text/plain");
               });
    http.start();
  }
  idem::memory_store store;
  idem::engine engine{store, idem::config{.purge_interval = 0ms}};
  std::atomic<int> runs{0};
  Server http;
};

// Each server as it is deployed.
template <class Server>
struct deployed_rig;
template <>
struct deployed_rig<httplib_test_server> : client_rig<httplib_test_server> {
  deployed_rig() : client_rig(idem::http::httplib_limits{}) {}
};
#ifdef IDEM_TEST_BEAST
template <>
struct deployed_rig<beast_test_server> : client_rig<beast_test_server> {
  deployed_rig() : client_rig(1) {}
};
#endif

}  // namespace

TEMPLATE_TEST_CASE("200 connections dripping their heads do not keep a normal request from its answer",
                   "[http][slow]", IDEM_HTTP_SERVERS) {
  deployed_rig<TestType> t;
  std::vector<std::unique_ptr<raw_socket>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<raw_socket>(t.http.port()));
    slow.back()->send("POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // and then one line now and then
  }
  for (int line = 0; line < 3; ++line)
    for (auto& s : slow) s->send("X-Drip-" + std::to_string(line) + ": still coming\r\n");
  auto c = t.http.client();
  c.set_read_timeout(10s);  // a bound, not a measurement
  auto answer = c.Post("/things", key_header("normal"), "x", "text/plain");
  REQUIRE(answer);
  CHECK(answer->status == 201);
  CHECK(t.runs == 1);
}

TEMPLATE_TEST_CASE("too many header fields are answered 431 and the connection closed, and the server still serves",
                   "[http][slow]", IDEM_HTTP_SERVERS) {
  deployed_rig<TestType> t;
  for (const int fields : {10000, 150}) {  // many, and few but more than the cap of 100
    raw_socket s(t.http.port());
    std::string request = "POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: many\r\n";
    for (int i = 0; i < fields; ++i) request += "X-" + std::to_string(i) + ": y\r\n";
    s.send(request + "Content-Length: 1\r\n\r\nx");
    const std::string head = s.head();
    CHECK(head.rfind("HTTP/1.1 431", 0) == 0);
    CHECK(head.find("application/problem+json") != std::string::npos);
    CHECK(s.closed());
  }
  CHECK(t.runs == 0);
  auto answer = t.http.client().Post("/things", key_header("after"), "x", "text/plain");
  REQUIRE(answer);
  CHECK(answer->status == 201);
}

TEMPLATE_TEST_CASE("a body answered before it was read closes the connection even when the client asked to keep it",
                   "[http][slow]", IDEM_HTTP_SERVERS) {
  deployed_rig<TestType> t;
  raw_socket s(t.http.port());
  s.send("POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\nIdempotency-Key: big\r\n"
         "Content-Type: text/plain\r\nContent-Length: 64\r\n\r\n" +
         std::string(64, 'x'));
  const std::string head = s.head();
  CHECK(head.rfind("HTTP/1.1 413", 0) == 0);
  CHECK(head.find("Connection: close") != std::string::npos);
  CHECK(head.find("Keep-Alive") == std::string::npos);
  CHECK(s.closed());
  CHECK(t.runs == 0);
}

#ifdef IDEM_TEST_BEAST
TEST_CASE("beast server: a head that does not arrive in time is answered 408 and closed", "[http][slow][beast]") {
  client_rig<beast_test_server> t(1, idem::http::beast::server_limits{.head_timeout = 300ms});
  raw_socket s(t.http.port());
  s.send("POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // never finished
  const std::string head = s.head();
  CHECK(head.rfind("HTTP/1.1 408", 0) == 0);
  CHECK(head.find("Connection: close") != std::string::npos);
  CHECK(s.closed());
  CHECK(t.runs == 0);
}
#endif

TEST_CASE("httplib server: apply_limits refuses a zero limit", "[http][httplib]") {
  httplib::Server server;
  CHECK_THROWS_AS(idem::http::apply_limits(server, {.threads = 0}), idem::configuration_error);
  CHECK_THROWS_AS(idem::http::apply_limits(server, {.keep_alive_max = 0}), idem::configuration_error);
  CHECK_THROWS_AS(idem::http::apply_limits(server, {.max_header_count = 0}), idem::configuration_error);
}
