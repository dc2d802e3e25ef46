// Privacy over HTTP: a real cpp-httplib server on 127.0.0.1 (tests/http/http_test_support.hpp)
// guarding routes with the engine on a memory store. Every answer — 201, replay, 400 (key too
// long, key malformed), 409, 422, 413, 500 (handler threw; completion failed; stored record
// damaged), 503 (store unreachable) — is captured whole (status line, every header, body) with every log line of the
// engine and the endpoint, and none holds the key.
#include "privacy/privacy_support.hpp"

#include <idem/http/httplib.hpp>
#include <idem/memory_store.hpp>

#include "http/http_test_support.hpp"
#include "support/faulty_store.hpp"

using namespace idem::privacy;
using namespace std::chrono_literals;

namespace {

void record(transcript& t, std::string_view scenario, const httplib::Result& r, int expected) {
  REQUIRE(r);
  CHECK(r->status == expected);
  t.add(std::string(scenario) + " status line", "HTTP/1.1 " + std::to_string(r->status) + " " + r->reason);
  for (const auto& [name, value] : r->headers) t.add(std::string(scenario) + " header", name + ": " + value);
  t.add(std::string(scenario) + " body", r->body);
}

// A store whose backend is gone: every call fails as a real store reports it.
class unreachable_store final : public idem::store {
 public:
  idem::acquire_result try_acquire(const idem::context& ctx) override { fail("try_acquire", ctx.id); }
  void complete(const idem::identity& id, const idem::lease_token&, const idem::payload&, std::chrono::milliseconds) override {
    fail("complete", id);
  }
  void release(const idem::identity& id, const idem::lease_token&) override { fail("release", id); }
  bool extend(const idem::identity& id, const idem::lease_token&, std::chrono::milliseconds) override { fail("extend", id); }
  std::size_t purge_expired() override { return 0; }
  std::size_t waiting() const noexcept override { return 0; }
  std::string_view name() const noexcept override { return "unreachable_store"; }

 private:
  [[noreturn]] static void fail(const char* operation, const idem::identity& id) {
    throw idem::store_unavailable_error(std::string("unreachable_store: cannot ") + operation + " " + id.to_string() +
                                            ": connection refused",
                                        operation, id.to_string());
  }
};

httplib::Headers with_key(std::string key) { return {{"Idempotency-Key", std::move(key)}}; }

}  // namespace

TEST_CASE("http: no answer and no log line reveals the key", "[privacy]") {
  transcript t;
  idem::test::faulty_store store;
  store.before_complete = [](const idem::identity& id) {
    if (id.scope() == "Privacy.down")
      throw idem::store_unavailable_error("faulty_store: cannot complete " + id.to_string(), "complete", id.to_string());
  };
  idem::engine eng{store, idem::config{.purge_interval = 0ms}, hooks_for(t)};
  idem::http_test::test_server http;
  auto options = [&](std::string scope) {
    idem::http::endpoint_options o{std::move(scope), {}, {}};
    o.protocol.log = t.sink("http log");
    o.protocol.max_body_bytes = 64;
    o.call.wait = 0ms;
    return o;
  };
  auto created = [](const httplib::Request&, httplib::Response& res) {
    res.status = 201;
    res.set_content("{\"created\":true}", "application/json");
  };
  idem::http::guard(http.server, "POST", "/things", eng, options("Privacy.things"), created);
  idem::http::guard(http.server, "POST", "/throws", eng, options("Privacy.throws"),
                    [](const httplib::Request&, httplib::Response&) { throw std::runtime_error("handler failed"); });
  idem::http::guard(http.server, "POST", "/down", eng, options("Privacy.down"), created);
  idem::http::guard(http.server, "POST", "/damaged", eng, options("Privacy.damaged"), created);
  unreachable_store gone;
  idem::engine gone_engine{gone, idem::config{.purge_interval = 0ms}, hooks_for(t)};
  idem::http::guard(http.server, "POST", "/unreachable", gone_engine, options("Privacy.unreachable"), created);
  auto client = http.serve();
  const std::string key(secret);

  record(t, "first call", client.Post("/things", with_key(key), "{\"n\":1}", "application/json"), 201);
  const auto replay = client.Post("/things", with_key(key), "{\"n\":1}", "application/json");
  record(t, "replay", replay, 201);
  CHECK(replay->get_header_value("Idempotent-Replayed") == "true");
  record(t, "different request", client.Post("/things", with_key(key), "{\"n\":2}", "application/json"), 422);
  record(t, "key too long", client.Post("/things", with_key(key + std::string(300, 'x')), "{}", "application/json"), 400);
  record(t, "key malformed", client.Post("/things", with_key("\"" + key + "\" trailing"), "{}", "application/json"), 400);
  record(t, "body too large", client.Post("/things", with_key(key + "-large"), std::string(100, 'b'), "text/plain"), 413);
  record(t, "handler threw", client.Post("/throws", with_key(key), "{}", "application/json"), 500);
  record(t, "completion failed", client.Post("/down", with_key(key), "{}", "application/json"), 500);
  record(t, "store unreachable", client.Post("/unreachable", with_key(key), "{}", "application/json"), 503);

  // In flight: the record is held through the store directly.
  idem::context held{.id = idem::identity("Privacy.things", key + "-held"), .ttl = 1h, .lease = 30s, .wait = 0ms};
  const auto holder = store.try_acquire(held);
  REQUIRE(std::holds_alternative<idem::acquired>(holder));
  const auto busy = client.Post("/things", with_key(key + "-held"), "{}", "application/json");
  record(t, "in flight", busy, 409);
  CHECK(busy->has_header("Retry-After"));
  store.release(held.id, std::get<idem::acquired>(holder).token);

  // A stored record that is not an http/response: replaying it is a 500 and a log line.
  idem::context damaged{.id = idem::identity("Privacy.damaged", key), .ttl = 1h, .lease = 30s, .wait = 0ms};
  const auto claim = store.try_acquire(damaged);
  REQUIRE(std::holds_alternative<idem::acquired>(claim));
  store.complete(damaged.id, std::get<idem::acquired>(claim).token, idem::payload{"json", "{}", {}}, 1h);
  record(t, "damaged record", client.Post("/damaged", with_key(key), "{}", "application/json"), 500);

  CHECK(t.contains("http log"));  // the handler failure and the damaged record were reported
  t.require_clean(30);
}
