// tests/http/http_beast_server_test.cpp — what <idem/http/beast_server.hpp> adds around the
// protocol: a slow or hostile client cannot starve the others, and heads that break the limits
// get 408 or 431. Real sockets on 127.0.0.1; the server runs on ONE io_context thread.
#include "beast_test_server.hpp"
#include "http_test_support.hpp"

#include <idem/engine.hpp>
#include <idem/memory_store.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using idem::http_test::beast_test_server;
using idem::http_test::key_header;
using idem::http_test::raw_socket;

namespace {

struct server_rig {
  explicit server_rig(idem::http::beast::server_limits limits = {}) : http(1, limits) {
    http.guard("POST", "/things", engine, {"Test.beast", {}, {.log = nullptr}},
               [this](const httplib::Request&, httplib::Response& res) {
                 res.status = 201;
                 res.set_content("run " + std::to_string(++runs), "text/plain");
               });
    http.start();
  }
  idem::memory_store store;
  idem::engine engine{store, idem::config{.purge_interval = 0ms}};
  std::atomic<int> runs{0};
  beast_test_server http;
};

}  // namespace

TEST_CASE("beast server: 200 connections dripping their heads do not keep a normal request from its answer",
          "[http][beast]") {
  server_rig t;
  std::vector<std::unique_ptr<raw_socket>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<raw_socket>(t.http.port()));
    slow.back()->send("POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // and then one line now and then
  }
  for (int line = 0; line < 3; ++line)
    for (auto& s : slow) s->send("X-Drip-" + std::to_string(line) + ": still coming\r\n");
  // One thread serves all of them: a normal request is answered while the 200 heads are open.
  auto c = t.http.client();
  c.set_read_timeout(10s);  // a bound, not a measurement
  auto answer = c.Post("/things", key_header("normal"), "x", "text/plain");
  REQUIRE(answer);
  CHECK(answer->status == 201);
  CHECK(t.runs == 1);
}

TEST_CASE("beast server: a head that does not arrive in time is answered 408 and closed", "[http][beast]") {
  server_rig t({.head_timeout = 300ms});
  raw_socket s(t.http.port());
  s.send("POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\n");  // never finished
  const std::string head = s.head();
  CHECK(head.rfind("HTTP/1.1 408", 0) == 0);
  CHECK(head.find("Connection: close") != std::string::npos);
  CHECK(t.runs == 0);
}

TEST_CASE("beast server: 10,000 header fields or an oversized head are answered 431", "[http][beast]") {
  server_rig t;
  {
    raw_socket s(t.http.port());
    std::string request = "POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: many\r\n";
    for (int i = 0; i < 10000; ++i) request += "X-" + std::to_string(i) + ": y\r\n";
    s.send(request + "Content-Length: 1\r\n\r\nx");
    CHECK(s.head().rfind("HTTP/1.1 431", 0) == 0);
  }
  {
    raw_socket s(t.http.port());
    std::string request = "POST /things HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: few\r\n";
    for (int i = 0; i < 150; ++i) request += "X-" + std::to_string(i) + ": y\r\n";  // small, but too many
    s.send(request + "Content-Length: 1\r\n\r\nx");
    CHECK(s.head().rfind("HTTP/1.1 431", 0) == 0);
  }
  CHECK(t.runs == 0);
  // The server still serves.
  auto answer = t.http.client().Post("/things", key_header("after"), "x", "text/plain");
  REQUIRE(answer);
  CHECK(answer->status == 201);
}
