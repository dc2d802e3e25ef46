// idem/http/endpoint.hpp — the Idempotency-Key protocol, independent of any server library.
//
// An adapter (cpp-httplib: <idem/http/httplib.hpp>) turns each request into a request_view and
// drives one idem::http::endpoint in two steps:
//
//   decision d = ep.admit(head);          // headers only: pass through, reject, or a claim
//   ... read at most ep.max_body_bytes() + 1 body bytes; over the limit: ep.too_large() ...
//   response r = ep.run(claim, request, handler);   // fingerprint, engine, replay
//
// All the rules (key syntax, statuses, fingerprint, tenant, what is stored, replay) live here;
// see docs/http.md. The engine does the claiming, waiting, heartbeat and completion.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <idem/context.hpp>
#include <idem/function_ref.hpp>
#include <idem/http/response.hpp>
#include <idem/log.hpp>

namespace idem {
class engine;
}

namespace idem::http {

// What the protocol needs to see of a request. Adapters implement it over their own type; the
// views must stay valid for the call they are passed to.
class request_view {
 public:
  virtual std::string_view method() const noexcept = 0;
  // The request target as received: path and query.
  virtual std::string_view target() const noexcept = 0;
  // The body bytes read so far (all of them once admitted and read).
  virtual std::string_view body() const noexcept = 0;
  // Every value of header `name` (case-insensitive), in the order received.
  virtual std::vector<std::string_view> header(std::string_view name) const = 0;

 protected:
  ~request_view() = default;
};

// Bytes whose SHA-256 is the request's fingerprint. The default is method, target and body.
using fingerprint_function = std::function<std::string(const request_view&)>;
// The tenant a request belongs to (e.g. its authenticated principal); it becomes part of the
// record's identity, so two tenants sending the same key never share a record.
using tenant_resolver = std::function<std::string(const request_view&)>;
// Edits a response before it is stored for replay (the first caller gets the handler's answer).
using response_sanitizer = std::function<void(response&)>;

// The default sanitiser: drops Set-Cookie, Set-Cookie2, Authorization, Proxy-Authorization,
// WWW-Authenticate, Proxy-Authenticate and Authentication-Info.
void default_sanitizer(response& r);

// Protocol settings. Keep one instance for a server's defaults and copy it to change an
// endpoint. validate() runs when an endpoint is built.
struct protocol_options {
  std::string key_header = "Idempotency-Key";  // an RFC 9110 token
  bool key_required = true;                    // false: a request without the header runs unguarded
  std::size_t max_body_bytes = 1024 * 1024;    // >= 0; larger bodies get 413
  int in_flight_status = 409;                  // 400..599, with Retry-After
  bool store_server_errors = false;            // false: a 5xx answer releases the record
  fingerprint_function fingerprint{};          // empty = method + target + body
  tenant_resolver tenant{};                    // empty = keys are shared by every client
  response_sanitizer sanitize = default_sanitizer;
  log_sink log = stderr_log_sink;  // idem's own reports (handler failures, damaged records)

  // Throws configuration_error naming the member and the rule.
  void validate() const;
};

// Everything one guarded endpoint needs: the record's scope, the engine options
// (ttl/lease/waitTimeout) and the protocol settings.
struct endpoint_options {
  std::string scope;
  call_options call{};
  protocol_options protocol{};
};

// The result of parsing an Idempotency-Key value.
struct key_parse_result {
  std::string key;      // the key (unquoted, unescaped) when ok()
  std::string problem;  // empty when valid; never quotes the value
  bool ok() const noexcept { return problem.empty(); }
};

// Parses one header value: an sf-string ("abc", with \" and \\ escapes, printable ASCII) or the
// same characters unquoted (abc), which is the same key. Empty, longer than 255 bytes, or
// anything else is a problem. Surrounding spaces and tabs are ignored.
[[nodiscard]] key_parse_result parse_key(std::string_view header_value);

// An application/problem+json response (RFC 9457) with `title` and `detail`.
[[nodiscard]] response problem(int status, std::string_view title, std::string_view detail);

// What admit() decided from the request head.
struct pass_through {};  // no key and none required: run the handler unguarded
struct claim {           // guarded: read the body, then run()
  std::string key;       // the parsed key. Client data: never log it
};
using decision = std::variant<pass_through, response, claim>;  // response = reject with it

// idem::http::endpoint
//
// One guarded route. Thread-safe; shared by every request of its route. The engine must outlive
// it.
class endpoint {
 public:
  // Validates the scope (idem::scope_problem), the call options and the protocol options; throws
  // configuration_error.
  endpoint(engine& eng, endpoint_options options);
  ~endpoint();
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;

  // Looks at the key header only: absent → pass_through or 400 (key_required), repeated or
  // invalid → 400, else a claim.
  [[nodiscard]] decision admit(const request_view& head) const;

  // The most body bytes a guarded request may have. An adapter reads at most one byte more.
  [[nodiscard]] std::size_t max_body_bytes() const noexcept;

  // The 413 answer for a body over max_body_bytes().
  [[nodiscard]] response too_large() const;

  // Runs the handler at most once for the claim's key (scoped by the tenant) and answers: the
  // handler's response (stored unless it is a 5xx and 5xx are not stored), a replay of the
  // stored one with `Idempotent-Replayed: true`, 422 for a different request with the same key,
  // the in-flight status with Retry-After, 500 when the handler threw (record released) or a
  // stored record is damaged, 503 when the store failed. The record is completed before this
  // returns. Never throws for a request; only std::bad_alloc escapes.
  [[nodiscard]] response run(const claim& c, const request_view& request, function_ref<response()> handler) const;

  // What an asynchronous handler is given: a function it calls once with its response, or with
  // what it failed with.
  using response_callback = std::function<void(std::exception_ptr, response)>;
  using async_response_handler = std::function<void(response_callback)>;

  // run() without blocking a thread (engine::async_run under it): the same rules and answers.
  // `handler` is started at most once and answers through its callback; `done` is called once
  // with the answer, from the thread that finished the last step (a store's or the handler's).
  // `request` is read (tenant, fingerprint) before async_run returns. A handler that throws
  // instead of answering counts as one that failed.
  void async_run(const claim& c, const request_view& request, async_response_handler handler,
                 std::function<void(response)> done) const;

  const endpoint_options& options() const noexcept { return options_; }

 private:
  class guarded_call;  // one request's steps, shared by run() and async_run()

  engine& engine_;
  endpoint_options options_;
  static_scope scope_;  // options_.scope, kept: a request allocates nothing for it
};

}  // namespace idem::http
