// tests/http/http_endpoint_test.cpp — the protocol over real loopback HTTP: a cpp-httplib server,
// httplib::Client, the engine and a real memory store (behind the fault-injecting decorator where a
// test needs to observe or slow a store operation).
// Every case of the table runs against both adapters.
#include "http_servers.hpp"
#include "support/eventually.hpp"
#include "support/faulty_store.hpp"

#include <idem/engine.hpp>
#include <idem/http/httplib.hpp>
#include <idem/policy_registry.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <vector>

using namespace std::chrono_literals;
using idem::http_test::key_header;
#ifdef IDEM_TEST_BEAST
using idem::http_test::beast_test_server;
#endif
using idem::http_test::httplib_test_server;
using idem::http_test::wire_form;

namespace {

// What a test sees of idem's reports: every log line of the engine and of the endpoint.
struct log_capture {
  std::mutex mutex;
  std::vector<std::string> lines;
  idem::log_sink sink() {
    return [this](const idem::log_record& r) {
      std::lock_guard lock(mutex);
      lines.push_back(r.message);
    };
  }
  bool mentions(const std::string& text) {
    std::lock_guard lock(mutex);
    for (const auto& l : lines)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
  std::size_t size() {
    std::lock_guard lock(mutex);
    return lines.size();
  }
};

// A gate a handler waits at until the test opens it (bounded: a stuck test fails, never hangs).
// wait() runs on server threads, where Catch assertions are not allowed: a gate that never
// opens makes the handler throw, which the test sees as a 500.
class gate {
 public:
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, 30s, [&] { return open_; })) throw std::runtime_error("the test never opened the gate");
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

// One case's world: a store, an engine and a server of kind `Server` (httplib_test_server or
// beast_test_server) on which the case registers guarded routes.
template <class Server>
struct rig {
  log_capture logs;
  idem::test::faulty_store store;
  idem::engine engine{store, idem::config{.purge_interval = 0ms}, idem::engine_hooks{.log = logs.sink()}};
  Server http;
  std::atomic<int> runs{0};

  idem::http::protocol_options protocol() {
    idem::http::protocol_options o;
    o.log = logs.sink();
    return o;
  }
  idem::http::endpoint_options options(std::string scope = "Test.endpoint") {
    return {std::move(scope), {}, protocol()};
  }
};

bool has_key_anywhere(const httplib::Result& r, const std::string& key) {
  if (r->body.find(key) != std::string::npos) return true;
  for (const auto& [name, value] : r->headers)
    if (name.find(key) != std::string::npos || value.find(key) != std::string::npos) return true;
  return false;
}

// A handler that creates "something" each time it runs: the body names the run.
idem::http::httplib_handler counting(std::atomic<int>& runs) {
  return [&runs](const httplib::Request& req, httplib::Response& res) {
    const int n = ++runs;
    res.status = 201;
    res.set_header("Location", "/things/" + std::to_string(n));
    res.set_content("{\"run\":" + std::to_string(n) + ",\"echo\":" + std::to_string(req.body.size()) + "}",
                    "application/json");
  };
}

}  // namespace

TEMPLATE_TEST_CASE("first call runs, a retry replays status, headers and body with Idempotent-Replayed", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  t.http.guard("POST", "/things", t.engine, t.options(), counting(t.runs));
  auto c = t.http.serve();

  auto first = c.Post("/things", key_header("\"k-1\""), "{\"a\":1}", "application/json");
  REQUIRE(first);
  CHECK(first->status == 201);
  CHECK(first->get_header_value("Location") == "/things/1");
  CHECK_FALSE(first->has_header("Idempotent-Replayed"));

  auto again = c.Post("/things", key_header("k-1"), "{\"a\":1}", "application/json");  // unquoted: the same key
  REQUIRE(again);
  CHECK(again->status == 201);
  CHECK(again->get_header_value("Idempotent-Replayed") == "true");
  CHECK(again->get_header_value_count("Idempotent-Replayed") == 1);
  CHECK(wire_form(*again) == wire_form(*first));
  CHECK(t.runs == 1);

  auto other = c.Post("/things", key_header("k-2"), "{\"a\":1}", "application/json");
  REQUIRE(other);
  CHECK(other->get_header_value("Location") == "/things/2");
  CHECK(t.runs == 2);
}

TEMPLATE_TEST_CASE("the record is complete before the client sees the response", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  t.http.guard("POST", "/things", t.engine, t.options(), counting(t.runs));
  auto c = t.http.serve();
  auto r = c.Post("/things", key_header("done-first"), "x", "text/plain");
  REQUIRE(r);
  REQUIRE(r->status == 201);
  // Looked up without a fingerprint and without waiting: it must already be complete.
  const idem::context ctx = t.engine.make_context("Test.endpoint", "done-first", {.wait = 0ms});
  CHECK(std::holds_alternative<idem::duplicate>(t.store.try_acquire(ctx)));
}

TEMPLATE_TEST_CASE("missing key: 400 problem when required, unguarded pass-through when not", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  t.http.guard("POST", "/required", t.engine, t.options("Test.required"), counting(t.runs));
  auto optional = t.options("Test.optional");
  optional.protocol.key_required = false;
  t.http.guard("POST", "/optional", t.engine, optional, counting(t.runs));
  auto c = t.http.serve();

  auto missing = c.Post("/required", "{}", "application/json");
  REQUIRE(missing);
  CHECK(missing->status == 400);
  CHECK(missing->get_header_value("Content-Type") == "application/problem+json");
  CHECK(missing->body.find("\"title\"") != std::string::npos);
  CHECK(missing->body.find("Idempotency-Key") != std::string::npos);
  CHECK(t.runs == 0);

  // The rejected request's body was drained: the same connection serves the next request.
  auto next = c.Post("/required", key_header("after-400"), "{}", "application/json");
  REQUIRE(next);
  CHECK(next->status == 201);

  auto p1 = c.Post("/optional", "{}", "application/json");
  auto p2 = c.Post("/optional", "{}", "application/json");
  REQUIRE(p1);
  REQUIRE(p2);
  CHECK(p1->status == 201);
  CHECK(p2->status == 201);
  CHECK_FALSE(p2->has_header("Idempotent-Replayed"));
  CHECK(t.runs == 3);  // after-400 and both unguarded calls
}

TEMPLATE_TEST_CASE("invalid keys get 400 and no response ever contains the key", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  t.http.guard("POST", "/things", t.engine, t.options(), counting(t.runs));
  auto c = t.http.serve();
  const std::string secret = "top-secret-key";
  for (const std::string& value : {std::string("\"\""), "\"" + secret, "\"" + secret + "\"tail", secret + " " + secret,
                                   "\"" + std::string(256, 'k') + "\"", secret + std::string(250, 'k')}) {
    INFO("value size " << value.size());
    auto r = c.Post("/things", key_header(value), "x", "text/plain");
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(r->get_header_value("Content-Type") == "application/problem+json");
    CHECK_FALSE(has_key_anywhere(r, secret));
  }
  httplib::Headers twice{{"Idempotency-Key", "a"}, {"Idempotency-Key", "b"}};
  auto r = c.Post("/things", twice, "x", "text/plain");
  REQUIRE(r);
  CHECK(r->status == 400);
  CHECK(t.runs == 0);
  CHECK_FALSE(t.logs.mentions(secret));
}

TEMPLATE_TEST_CASE("a configured header name replaces Idempotency-Key", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  auto o = t.options();
  o.protocol.key_header = "X-Request-Key";
  t.http.guard("POST", "/things", t.engine, o, counting(t.runs));
  auto c = t.http.serve();
  auto plain = c.Post("/things", key_header("k"), "x", "text/plain");
  REQUIRE(plain);
  CHECK(plain->status == 400);
  CHECK(plain->body.find("X-Request-Key") != std::string::npos);
  auto a = c.Post("/things", key_header("k", "X-Request-Key"), "x", "text/plain");
  auto b = c.Post("/things", key_header("k", "x-request-key"), "x", "text/plain");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->status == 201);
  CHECK(b->get_header_value("Idempotent-Replayed") == "true");
  CHECK(t.runs == 1);

  auto bad = t.options("Test.bad");
  bad.protocol.key_header = "Bad Header";
  CHECK_THROWS_AS(t.http.guard("POST", "/bad", t.engine, bad, counting(t.runs)),
                  idem::configuration_error);
}

TEMPLATE_TEST_CASE("same key with a different method, target or body is 422, and a custom fingerprint decides instead",
          "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  t.http.guard("POST", "/things", t.engine, t.options(), counting(t.runs));
  t.http.guard("PUT", "/things", t.engine, t.options(), counting(t.runs));
  auto loose = t.options("Test.loose");
  // Only the "amount" line counts: a different "note" is the same request.
  loose.protocol.fingerprint = [](const idem::http::request_view& r) {
    const std::string_view body = r.body();
    return std::string(body.substr(0, body.find('\n')));
  };
  t.http.guard("POST", "/loose", t.engine, loose, counting(t.runs));
  auto c = t.http.serve();

  REQUIRE(c.Post("/things", key_header("fp"), "amount=1", "text/plain")->status == 201);
  auto body = c.Post("/things", key_header("fp"), "amount=2", "text/plain");
  auto target = c.Post("/things?x=1", key_header("fp"), "amount=1", "text/plain");
  auto method = c.Put("/things", key_header("fp"), "amount=1", "text/plain");
  for (auto* r : {&body, &target, &method}) {
    REQUIRE(*r);
    CHECK((*r)->status == 422);
    CHECK((*r)->get_header_value("Content-Type") == "application/problem+json");
    CHECK_FALSE(has_key_anywhere(*r, "fp\""));
  }
  CHECK(t.runs == 1);

  REQUIRE(c.Post("/loose", key_header("fp"), "amount=1\nnote=a", "text/plain")->status == 201);
  auto same = c.Post("/loose", key_header("fp"), "amount=1\nnote=b", "text/plain");
  REQUIRE(same);
  CHECK(same->get_header_value("Idempotent-Replayed") == "true");
  auto changed = c.Post("/loose", key_header("fp"), "amount=9\nnote=a", "text/plain");
  REQUIRE(changed);
  CHECK(changed->status == 422);
  CHECK(t.runs == 2);
}

TEMPLATE_TEST_CASE("a concurrent duplicate waits for the real answer inside the store and gets the replay", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  gate release;
  t.http.guard("POST", "/slow", t.engine, t.options(),
                    [&](const httplib::Request& req, httplib::Response& res) {
                      release.wait();
                      counting(t.runs)(req, res);
                    });
  t.http.start();

  // Whichever request claims the record first blocks in the handler; the other one must then be
  // waiting inside the store (default waitTimeout PT10S), not answered 409.
  auto first = std::async(std::launch::async, [&] { return t.http.client().Post("/slow", key_header("w"), "b", "text/plain"); });
  auto second = std::async(std::launch::async, [&] { return t.http.client().Post("/slow", key_header("w"), "b", "text/plain"); });
  REQUIRE(idem::test::eventually([&] { return t.store.waiting() == 1; }, 20s));
  release.open();
  auto a = first.get();
  auto b = second.get();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(t.runs == 1);
  // Which of the two ran depends on who claimed first; the other one replays it.
  const bool a_replayed = a->has_header("Idempotent-Replayed");
  CHECK(a_replayed != b->has_header("Idempotent-Replayed"));
  CHECK(wire_form(*a) == wire_form(*b));
}

TEMPLATE_TEST_CASE("waitTimeout PT0S: a concurrent duplicate gets 409 with Retry-After in whole seconds", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  gate release;
  std::atomic<bool> inside{false};
  auto o = t.options();
  o.call.wait = 0ms;
  o.call.lease = 2500ms;
  auto handler = [&](const httplib::Request& req, httplib::Response& res) {
    inside = true;
    release.wait();
    counting(t.runs)(req, res);
  };
  t.http.guard("POST", "/busy", t.engine, o, handler);
  t.http.start();

  auto first = std::async(std::launch::async, [&] { return t.http.client().Post("/busy", key_header("b"), "x", "text/plain"); });
  REQUIRE(idem::test::eventually([&] { return inside.load(); }, 20s));
  auto c = t.http.client();
  auto busy = c.Post("/busy", key_header("b"), "x", "text/plain");
  REQUIRE(busy);
  CHECK(busy->status == 409);
  CHECK(busy->get_header_value("Content-Type") == "application/problem+json");
  const std::string retry = busy->get_header_value("Retry-After");
  REQUIRE_FALSE(retry.empty());
  CHECK(retry.find_first_not_of("0123456789") == std::string::npos);
  CHECK(std::stoi(retry) >= 1);
  CHECK(std::stoi(retry) <= 3);  // ceil of the holder's remaining lease of at most 2.5 s

  release.open();
  REQUIRE(first.get()->status == 201);
  CHECK(t.runs == 1);
  CHECK(c.Post("/busy", key_header("b"), "x", "text/plain")->get_header_value("Idempotent-Replayed") == "true");
}

TEMPLATE_TEST_CASE("in-flight status is configurable: 503 with Retry-After", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  gate release;
  std::atomic<bool> inside{false};
  auto o = t.options();
  o.call.wait = 0ms;
  o.protocol.in_flight_status = 503;
  t.http.guard("POST", "/busy", t.engine, o, [&](const httplib::Request& req, httplib::Response& res) {
    inside = true;
    release.wait();
    counting(t.runs)(req, res);
  });
  t.http.start();
  auto first = std::async(std::launch::async, [&] { return t.http.client().Post("/busy", key_header("b"), "x", "text/plain"); });
  REQUIRE(idem::test::eventually([&] { return inside.load(); }, 20s));
  auto busy = t.http.client().Post("/busy", key_header("b"), "x", "text/plain");
  release.open();
  REQUIRE(busy);
  CHECK(busy->status == 503);
  CHECK(std::stoi(busy->get_header_value("Retry-After")) >= 1);
  REQUIRE(first.get()->status == 201);
}

TEMPLATE_TEST_CASE("20 concurrent POSTs with one key: exactly one execution, every other answer a byte-identical replay",
          "[http][concurrency]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  gate release;
  t.http.guard("POST", "/pay", t.engine, t.options(),
                    [&](const httplib::Request& req, httplib::Response& res) {
                      release.wait();
                      counting(t.runs)(req, res);
                    });
  t.http.start();
  std::vector<std::future<httplib::Result>> calls;
  for (int i = 0; i < 20; ++i)
    calls.push_back(std::async(std::launch::async, [&] {
      return t.http.client().Post("/pay", key_header("\"same\""), "{\"amount\":5}", "application/json");
    }));
  // One holds the record in the handler, the 19 others wait inside the store.
  REQUIRE(idem::test::eventually([&] { return t.store.waiting() == 19; }, 30s));
  release.open();
  std::vector<httplib::Result> answers;
  for (auto& f : calls) answers.push_back(f.get());
  CHECK(t.runs == 1);
  int executed = 0;
  int replays = 0;
  std::string reference;
  for (auto& r : answers) {
    REQUIRE(r);
    if (r->status == 409) continue;
    if (r->has_header("Idempotent-Replayed"))
      ++replays;
    else
      ++executed;
    if (reference.empty()) reference = wire_form(*r);
    CHECK(wire_form(*r) == reference);
  }
  CHECK(executed == 1);
  CHECK(replays == 19);
}

TEMPLATE_TEST_CASE("20 concurrent POSTs with PT0S: one execution, the others replays or 409", "[http][concurrency]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  auto o = t.options();
  o.call.wait = 0ms;
  t.http.guard("POST", "/pay", t.engine, o, counting(t.runs));
  t.http.start();
  std::vector<std::future<httplib::Result>> calls;
  for (int i = 0; i < 20; ++i)
    calls.push_back(std::async(std::launch::async, [&] {
      return t.http.client().Post("/pay", key_header("same"), "{\"amount\":5}", "application/json");
    }));
  int executed = 0;
  std::string reference;
  std::vector<httplib::Result> answers;
  for (auto& f : calls) answers.push_back(f.get());
  for (auto& r : answers) {
    INFO("error " << httplib::to_string(r.error()));
    REQUIRE(r);
    if (r->status == 409) {
      CHECK(r->has_header("Retry-After"));
      continue;
    }
    REQUIRE(r->status == 201);
    if (!r->has_header("Idempotent-Replayed")) ++executed;
    if (reference.empty()) reference = wire_form(*r);
    CHECK(wire_form(*r) == reference);
  }
  CHECK(executed == 1);
  CHECK(t.runs == 1);
}

TEMPLATE_TEST_CASE("a slow handler outliving its lease is kept alive by the heartbeat", "[http][concurrency]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  gate release;
  std::atomic<int> extends{0};
  t.store.before_extend = [&](const idem::identity&) {
    ++extends;
    return true;
  };
  auto o = t.options();
  // Heartbeat every 200 ms. With 100 ms (every 50 ms) a sanitizer run on a loaded 2-core runner
  // stalled the heartbeat past the lease once (CI of fa72711, ASan): the duplicate stole the record.
  o.call.lease = 400ms;
  o.call.wait = 30s;
  t.http.guard("POST", "/slow", t.engine, o, [&](const httplib::Request& req, httplib::Response& res) {
    release.wait();
    counting(t.runs)(req, res);
  });
  t.http.start();
  auto first = std::async(std::launch::async, [&] { return t.http.client().Post("/slow", key_header("hb"), "x", "text/plain"); });
  REQUIRE(idem::test::eventually([&] { return extends >= 1; }, 20s));
  auto second = std::async(std::launch::async, [&] { return t.http.client().Post("/slow", key_header("hb"), "x", "text/plain"); });
  REQUIRE(idem::test::eventually([&] { return t.store.waiting() == 1; }, 20s));
  // Six extends after the duplicate started waiting: three full leases have passed, so without
  // the heartbeat the duplicate would have stolen the record and run the handler a second time.
  const int seen = extends;
  REQUIRE(idem::test::eventually([&] { return extends >= seen + 6; }, 20s));
  CHECK(t.store.waiting() == 1);
  release.open();
  auto a = first.get();
  auto b = second.get();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(t.runs == 1);
  CHECK(a->status == 201);
  CHECK(b->get_header_value("Idempotent-Replayed") == "true");
  CHECK(wire_form(*a) == wire_form(*b));
}

TEMPLATE_TEST_CASE("binary request and response bodies are byte-exact on replay", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  t.http.guard("POST", "/echo", t.engine, t.options(),
                    [&](const httplib::Request& req, httplib::Response& res) {
                      ++t.runs;
                      std::string body = req.body;
                      std::reverse(body.begin(), body.end());
                      res.set_content(body + std::string("\0\xff", 2), "application/octet-stream");
                    });
  t.http.start();
  std::string bytes;
  for (int i = 0; i < 4096; ++i) bytes.push_back(static_cast<char>((i * 7) & 0xff));
  auto c = t.http.client();
  auto a = c.Post("/echo", key_header("bin"), bytes, "application/octet-stream");
  auto b = c.Post("/echo", key_header("bin"), bytes, "application/octet-stream");
  REQUIRE(a);
  REQUIRE(b);
  std::string expected(bytes.rbegin(), bytes.rend());
  expected += std::string("\0\xff", 2);
  CHECK(a->body == expected);
  CHECK(b->body == expected);
  CHECK(b->get_header_value("Idempotent-Replayed") == "true");
  CHECK(t.runs == 1);
  // A body that differs in one byte is another request.
  bytes[100] ^= 1;
  CHECK(c.Post("/echo", key_header("bin"), bytes, "application/octet-stream")->status == 422);
}

TEMPLATE_TEST_CASE("replay keeps multi-value headers in order, drops credentials, connection headers and a spoofed marker",
          "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  t.http.guard("POST", "/h", t.engine, t.options(),
                    [&](const httplib::Request&, httplib::Response& res) {
                      ++t.runs;
                      res.status = 202;
                      res.headers.emplace("X-Multi", "first");
                      res.headers.emplace("X-Multi", "second");
                      res.headers.emplace("X-Multi", "third");
                      res.headers.emplace("Set-Cookie", "session=abc");
                      res.headers.emplace("Authorization", "Bearer leaked");
                      res.headers.emplace("Connection", "X-Hop");
                      res.headers.emplace("X-Hop", "per-connection");
                      res.headers.emplace("Idempotent-Replayed", "true");  // a handler cannot fake a replay
                      res.headers.emplace("ETag", "\"v1\"");
                      res.set_content("ok", "text/plain");
                    });
  auto c = t.http.serve();
  auto a = c.Post("/h", key_header("hdr"), "x", "text/plain");
  REQUIRE(a);
  CHECK(a->status == 202);
  CHECK_FALSE(a->has_header("Idempotent-Replayed"));
  CHECK(a->get_header_value("Set-Cookie") == "session=abc");  // the first caller gets the handler's answer

  auto b = t.http.client().Post("/h", key_header("hdr"), "x", "text/plain");
  REQUIRE(b);
  CHECK(b->status == 202);
  REQUIRE(b->get_header_value_count("X-Multi") == 3);
  CHECK(b->get_header_value("X-Multi", 0) == "first");
  CHECK(b->get_header_value("X-Multi", 1) == "second");
  CHECK(b->get_header_value("X-Multi", 2) == "third");
  CHECK(b->get_header_value("ETag") == "\"v1\"");
  CHECK_FALSE(b->has_header("Set-Cookie"));
  CHECK_FALSE(b->has_header("Authorization"));
  CHECK_FALSE(b->has_header("X-Hop"));
  CHECK(b->get_header_value_count("Idempotent-Replayed") == 1);
  CHECK(b->get_header_value("Idempotent-Replayed") == "true");
  CHECK(b->body == "ok");
  CHECK(t.runs == 1);
}

TEMPLATE_TEST_CASE("a replacement sanitiser decides what is stored", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  auto o = t.options();
  o.protocol.sanitize = [](idem::http::response& r) {
    std::erase_if(r.headers, [](const idem::http::header& h) { return idem::http::same_name(h.name, "X-Internal"); });
  };
  t.http.guard("POST", "/s", t.engine, o, [&](const httplib::Request&, httplib::Response& res) {
    res.headers.emplace("Set-Cookie", "kept=1");
    res.headers.emplace("X-Internal", "dropped");
    res.set_content("s", "text/plain");
  });
  auto c = t.http.serve();
  REQUIRE(c.Post("/s", key_header("san"), "x", "text/plain"));
  auto b = c.Post("/s", key_header("san"), "x", "text/plain");
  REQUIRE(b);
  CHECK(b->get_header_value("Set-Cookie") == "kept=1");
  CHECK_FALSE(b->has_header("X-Internal"));
}

TEMPLATE_TEST_CASE("a handler that throws: 500 problem without its message, record released, a retry succeeds", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  std::atomic<bool> fail{true};
  t.http.guard("POST", "/flaky", t.engine, t.options(),
                    [&](const httplib::Request& req, httplib::Response& res) {
                      if (fail.exchange(false)) throw std::runtime_error("database said no for key flaky-key-1");
                      counting(t.runs)(req, res);
                    });
  auto c = t.http.serve();
  auto a = c.Post("/flaky", key_header("flaky-key-1"), "x", "text/plain");
  REQUIRE(a);
  CHECK(a->status == 500);
  CHECK(a->get_header_value("Content-Type") == "application/problem+json");
  CHECK(a->body.find("database said no") == std::string::npos);
  CHECK_FALSE(has_key_anywhere(a, "flaky-key-1"));
  // Logged with the record's masked form; the key inside the exception's message is masked too.
  CHECK(t.logs.mentions("Test.endpoint/#"));
  CHECK(t.logs.mentions("database said no"));
  CHECK_FALSE(t.logs.mentions("flaky-key-1"));

  auto b = c.Post("/flaky", key_header("flaky-key-1"), "x", "text/plain");
  REQUIRE(b);
  CHECK(b->status == 201);
  CHECK_FALSE(b->has_header("Idempotent-Replayed"));
  CHECK(t.runs == 1);
}

TEMPLATE_TEST_CASE("a 5xx answer is released by default so a retry can succeed, and stored when configured", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  std::atomic<int> calls{0};
  auto handler = [&](const httplib::Request&, httplib::Response& res) {
    const int n = ++calls;
    res.status = n == 1 ? 503 : 200;
    res.set_content("answer " + std::to_string(n), "text/plain");
  };
  t.http.guard("POST", "/released", t.engine, t.options("Test.released"), handler);
  auto stored = t.options("Test.stored");
  stored.protocol.store_server_errors = true;
  t.http.guard("POST", "/stored", t.engine, stored, handler);
  auto c = t.http.serve();

  auto a = c.Post("/released", key_header("5xx"), "x", "text/plain");
  REQUIRE(a);
  CHECK(a->status == 503);
  CHECK(a->body == "answer 1");
  auto b = c.Post("/released", key_header("5xx"), "x", "text/plain");
  REQUIRE(b);
  CHECK(b->status == 200);
  CHECK(b->body == "answer 2");
  CHECK_FALSE(b->has_header("Idempotent-Replayed"));

  calls = 0;
  auto s1 = c.Post("/stored", key_header("5xx"), "x", "text/plain");
  auto s2 = c.Post("/stored", key_header("5xx"), "x", "text/plain");
  REQUIRE(s1);
  REQUIRE(s2);
  CHECK(s1->status == 503);
  CHECK(s2->status == 503);
  CHECK(s2->body == "answer 1");
  CHECK(s2->get_header_value("Idempotent-Replayed") == "true");
  CHECK(calls == 1);
}

TEMPLATE_TEST_CASE("a 4xx answer is stored and replayed", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  t.http.guard("POST", "/v", t.engine, t.options(), [&](const httplib::Request&, httplib::Response& res) {
    ++t.runs;
    res.status = 409;
    res.set_content("{\"error\":\"insufficient funds\"}", "application/json");
  });
  auto c = t.http.serve();
  auto a = c.Post("/v", key_header("4xx"), "x", "text/plain");
  auto b = c.Post("/v", key_header("4xx"), "x", "text/plain");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(b->status == 409);
  CHECK(b->get_header_value("Idempotent-Replayed") == "true");
  CHECK(wire_form(*a) == wire_form(*b));
  CHECK(t.runs == 1);
}

TEMPLATE_TEST_CASE("a body over the limit is 413 and the handler never runs, and at the limit it is accepted", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  auto o = t.options();
  o.protocol.max_body_bytes = 1024;
  t.http.guard("POST", "/small", t.engine, o, counting(t.runs));
  t.http.start();
  auto over = t.http.client().Post("/small", key_header("big"), std::string(1025, 'x'), "text/plain");
  REQUIRE(over);
  CHECK(over->status == 413);
  CHECK(over->get_header_value("Content-Type") == "application/problem+json");
  CHECK(over->get_header_value("Connection") == "close");
  CHECK(t.runs == 0);
  auto at = t.http.client().Post("/small", key_header("big"), std::string(1024, 'x'), "text/plain");
  REQUIRE(at);
  CHECK(at->status == 201);  // the 413 stored nothing: the key is still free
  CHECK(t.runs == 1);
}

TEMPLATE_TEST_CASE("the body limit answers 413 without reading the whole body", "[http]", IDEM_HTTP_SERVERS) {
  // httplib::Client cannot send part of a body and stop, so this client is a plain socket: it
  // announces 64 MiB, sends a little more than the limit and then nothing. A server that read the
  // whole body would never answer; this one answers 413 at once.
  rig<TestType> t;
  auto o = t.options();
  o.protocol.max_body_bytes = 64 * 1024;
  t.http.guard("POST", "/small", t.engine, o, counting(t.runs));
  t.http.start();

  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(t.http.port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  timeval timeout{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  const std::string head =
      "POST /small HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: huge\r\nContent-Type: text/plain\r\n"
      "Content-Length: 67108864\r\n\r\n";
  const std::string part(64 * 1024 + 4096, 'x');
  REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  REQUIRE(::send(fd, part.data(), part.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(part.size()));
  std::string answer;
  char buffer[4096];
  while (answer.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    INFO("recv: " << std::strerror(errno));
    REQUIRE(n > 0);  // a timeout (the server waiting for the rest of the body) fails here
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  CHECK(answer.rfind("HTTP/1.1 413", 0) == 0);
  CHECK(answer.find("Connection: close") != std::string::npos);
  CHECK(t.runs == 0);
}

TEMPLATE_TEST_CASE("two tenants sending the same key never see each other's responses", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  auto o = t.options();
  o.protocol.tenant = [](const idem::http::request_view& r) {
    const auto v = r.header("X-Tenant");
    return v.empty() ? std::string() : std::string(v.front());
  };
  t.http.guard("POST", "/t", t.engine, o, counting(t.runs));
  auto c = t.http.serve();
  auto with = [](const std::string& tenant) { return httplib::Headers{{"Idempotency-Key", "shared"}, {"X-Tenant", tenant}}; };
  auto alice = c.Post("/t", with("alice"), "x", "text/plain");
  auto bob = c.Post("/t", with("bob"), "x", "text/plain");
  auto alice2 = c.Post("/t", with("alice"), "x", "text/plain");
  // A tenant name that is a prefix/suffix play on the key must not collide either.
  auto tricky = c.Post("/t", httplib::Headers{{"Idempotency-Key", "ared"}, {"X-Tenant", "alicesh"}}, "x", "text/plain");
  REQUIRE(alice);
  REQUIRE(bob);
  REQUIRE(alice2);
  REQUIRE(tricky);
  CHECK(alice->get_header_value("Location") == "/things/1");
  CHECK(bob->get_header_value("Location") == "/things/2");
  CHECK_FALSE(bob->has_header("Idempotent-Replayed"));
  CHECK(alice2->get_header_value("Location") == "/things/1");
  CHECK(alice2->get_header_value("Idempotent-Replayed") == "true");
  CHECK_FALSE(tricky->has_header("Idempotent-Replayed"));
  CHECK(t.runs == 3);
}

TEMPLATE_TEST_CASE("a damaged stored response replays as a 500 problem, logged without the key", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  t.http.guard("POST", "/d", t.engine, t.options(), counting(t.runs));
  t.http.start();
  // Another writer left a record under this endpoint's scope that is not a valid http/response.
  const idem::context ctx = t.engine.make_context("Test.endpoint", "damaged-key", {});
  auto claimed = t.store.try_acquire(ctx);
  REQUIRE(std::holds_alternative<idem::acquired>(claimed));
  idem::payload bad{"http/response", std::string("\x01\x00\xc8\xff\xff\xff\xff", 7), {}};
  t.store.complete(ctx.id, std::get<idem::acquired>(claimed).token, bad, 1h);

  auto r = t.http.client().Post("/d", key_header("damaged-key"), "x", "text/plain");
  REQUIRE(r);
  CHECK(r->status == 500);
  CHECK(r->get_header_value("Content-Type") == "application/problem+json");
  CHECK_FALSE(has_key_anywhere(r, "damaged-key"));
  CHECK(t.logs.mentions("damaged"));
  CHECK(t.logs.mentions(ctx.id.to_string()));
  CHECK_FALSE(t.logs.mentions("damaged-key"));
  CHECK(t.runs == 0);
}

// ---- Endpoints as methods: route<&C::m> with a hand-written policy, as idem-annotate would emit it.

namespace {

class OrderController {
 public:
  // [[idem::idempotent(waitTimeout = "PT0S", ttl = "PT1H")]]
  void place(const httplib::Request& req, httplib::Response& res) {
    ++placed;
    res.status = 201;
    res.set_content("order " + std::to_string(placed.load()) + " for " + req.body, "text/plain");
  }
  std::atomic<int> placed{0};
};

}  // namespace

template <>
struct idem::policy<&OrderController::place> {
  static constexpr std::string_view function = "OrderController::place";
  static constexpr std::string_view scope = "OrderController.place";
  static constexpr std::string_view file = "tests/http/http_endpoint_test.cpp";
  static constexpr unsigned line = 640;
  static constexpr unsigned column = 5;
  static constexpr bool http_endpoint = true;
  static idem::call_options options() { return {.ttl = std::chrono::hours(1), .wait = std::chrono::milliseconds(0)}; }
  static const bool registered;
};
const bool idem::policy<&OrderController::place>::registered = idem::detail::register_policy(
    {.function = function, .scope = scope, .options = options(), .result_type = "void", .http_endpoint = true,
     .file = file, .line = line, .column = column});

TEST_CASE("route<&C::m> reads scope and options from the policy, which is registered as an endpoint",
          "[http]") {
  rig<httplib_test_server> t;
  OrderController controller;
  auto ep = idem::http::route<&OrderController::place>(t.http.server, "POST", "/orders", t.engine, controller,
                                                       t.protocol());
  CHECK(ep->options().scope == "OrderController.place");
  CHECK(ep->options().call.wait == std::chrono::milliseconds(0));
  CHECK(ep->options().call.ttl == std::chrono::hours(1));
  bool found = false;
  for (const auto& p : idem::detail::registered_policies())
    if (p.function == "OrderController::place") found = p.http_endpoint;
  CHECK(found);
  auto c = t.http.serve();
  auto a = c.Post("/orders", key_header("o-1"), "3 books", "text/plain");
  auto b = c.Post("/orders", key_header("o-1"), "3 books", "text/plain");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->body == "order 1 for 3 books");
  CHECK(b->body == "order 1 for 3 books");
  CHECK(b->get_header_value("Idempotent-Replayed") == "true");
  CHECK(controller.placed == 1);
  // The record lives under the policy's scope.
  const idem::context ctx = t.engine.make_context("OrderController.place", "o-1", {.wait = 0ms});
  CHECK(std::holds_alternative<idem::duplicate>(t.store.try_acquire(ctx)));
}

TEMPLATE_TEST_CASE("guard() refuses a bad scope, bad durations and an unknown method at registration", "[http]", IDEM_HTTP_SERVERS) {
  rig<TestType> t;
  auto handler = counting(t.runs);
  CHECK_THROWS_AS(t.http.guard("POST", "/a", t.engine, t.options("bad:scope"), handler),
                  idem::configuration_error);
  auto o = t.options();
  o.call.lease = 1ms;
  CHECK_THROWS_AS(t.http.guard("POST", "/a", t.engine, o, handler), idem::configuration_error);
  CHECK_THROWS_AS(t.http.guard("TRACE", "/a", t.engine, t.options(), handler),
                  idem::configuration_error);
}

TEST_CASE("a streamed answer cannot be recorded: 500, record released", "[http]") {
  rig<httplib_test_server> t;
  std::atomic<bool> stream{true};
  t.http.guard("POST", "/stream", t.engine, t.options(),
                    [&](const httplib::Request&, httplib::Response& res) {
                      if (stream.exchange(false)) {
                        res.set_content_provider(5, "text/plain", [](std::size_t, std::size_t, httplib::DataSink& sink) {
                          sink.write("hello", 5);
                          return true;
                        });
                        return;
                      }
                      res.set_content("whole", "text/plain");
                    });
  auto c = t.http.serve();
  auto a = c.Post("/stream", key_header("st"), "x", "text/plain");
  REQUIRE(a);
  CHECK(a->status == 500);
  CHECK(a->get_header_value("Content-Type") == "application/problem+json");
  CHECK(t.logs.mentions("content provider"));
  auto b = c.Post("/stream", key_header("st"), "x", "text/plain");
  REQUIRE(b);
  CHECK(b->status == 200);
  CHECK(b->body == "whole");
}
