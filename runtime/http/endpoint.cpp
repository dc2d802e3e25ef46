// The Idempotency-Key protocol over the engine. See docs/http.md for the rules and why.
#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/http/endpoint.hpp>
#include <idem/identity.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <stdexcept>
#include <utility>

namespace idem::http {
namespace {

constexpr std::string_view replay_marker = "Idempotent-Replayed";

// Headers that describe one connection, never a stored response (RFC 9110 §7.6.1), plus
// Content-Length, which the server recomputes from the body.
constexpr std::array<std::string_view, 10> hop_by_hop{
    "Connection", "Keep-Alive",          "Proxy-Connection",    "TE",      "Trailer", "Transfer-Encoding",
    "Upgrade",    "Proxy-Authenticate", "Proxy-Authorization", "Content-Length"};

constexpr std::array<std::string_view, 7> credential_headers{
    "Set-Cookie",         "Set-Cookie2",        "Authorization",      "Proxy-Authorization",
    "WWW-Authenticate",   "Proxy-Authenticate", "Authentication-Info"};

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

void erase_named(response& r, std::string_view name) {
  std::erase_if(r.headers, [&](const header& h) { return same_name(h.name, name); });
}

// Drops the hop-by-hop headers and every header the Connection header names.
void strip_hop_by_hop(response& r) {
  std::vector<std::string> named;
  for (const auto& h : r.headers) {
    if (!same_name(h.name, "Connection")) continue;
    std::string_view list = h.value;
    while (!list.empty()) {
      const auto comma = list.find(',');
      const std::string_view item = trim(list.substr(0, comma));
      if (!item.empty()) named.emplace_back(item);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  std::erase_if(r.headers, [&](const header& h) {
    return std::any_of(hop_by_hop.begin(), hop_by_hop.end(), [&](std::string_view n) { return same_name(h.name, n); }) ||
           std::any_of(named.begin(), named.end(), [&](const std::string& n) { return same_name(h.name, n); });
  });
}

// The engine stores what the action returns as is: the action already encoded it.
struct payload_codec {
  payload encode(const payload& p) const { return p; }
  payload decode(const payload& p) const { return p; }
};

// Thrown through the engine by the action to release the record and answer `first` anyway.
// Lifecycle listeners receive it as the on_failed{action} cause.
struct not_stored : std::exception {
  const char* what() const noexcept override {
    return "the handler answered with a 5xx status; the record was released so that a retry runs it again";
  }
};

std::string replace_all(std::string text, std::string_view what, std::string_view with) {
  if (what.empty()) return text;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size()))
    text.replace(at, what.size(), with);
  return text;
}

response with_retry_after(response r, std::chrono::milliseconds retry_after) {
  long long seconds = (retry_after.count() + 999) / 1000;
  if (seconds < 1) seconds = 1;
  r.headers.push_back({"Retry-After", std::to_string(seconds)});
  return r;
}

}  // namespace

void default_sanitizer(response& r) {
  for (std::string_view name : credential_headers) erase_named(r, name);
}

void protocol_options::validate() const {
  if (!is_token(key_header))
    throw configuration_error("protocol_options.key_header must be an HTTP token (RFC 9110), got \"" + key_header +
                              "\"");
  if (in_flight_status < 400 || in_flight_status > 599)
    throw configuration_error("protocol_options.in_flight_status must be a 4xx or 5xx status, got " +
                              std::to_string(in_flight_status));
  if (!sanitize) throw configuration_error("protocol_options.sanitize must not be empty (use a no-op to keep all)");
}

key_parse_result parse_key(std::string_view value) {
  value = trim(value);
  if (value.empty()) return {{}, "the key is empty"};
  std::string key;
  if (value.front() == '"') {
    // sf-string: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, printable ASCII.
    std::size_t i = 1;
    bool closed = false;
    for (; i < value.size(); ++i) {
      const char c = value[i];
      if (c == '"') {
        closed = true;
        ++i;
        break;
      }
      if (c == '\\') {
        if (i + 1 >= value.size() || (value[i + 1] != '"' && value[i + 1] != '\\'))
          return {{}, "the key is not a valid sf-string (only \\\" and \\\\ may be escaped)"};
        key.push_back(value[++i]);
        continue;
      }
      if (c < 0x20 || c > 0x7e) return {{}, "the key is not a valid sf-string (printable ASCII only)"};
      key.push_back(c);
    }
    if (!closed) return {{}, "the key is not a valid sf-string (no closing quote)"};
    if (i != value.size()) return {{}, "the key is not a valid sf-string (characters after the closing quote)"};
  } else {
    for (char c : value)
      if (c < 0x21 || c > 0x7e || c == '"' || c == '\\')
        return {{}, "the key is neither an sf-string nor a bare printable ASCII value without spaces, quotes or "
                    "backslashes"};
    key.assign(value);
  }
  if (std::string problem = key_problem(key); !problem.empty()) return {{}, std::move(problem)};
  return {std::move(key), {}};
}

response problem(int status, std::string_view title, std::string_view detail) {
  nlohmann::json body = {{"type", "about:blank"}, {"title", title}, {"status", status}, {"detail", detail}};
  return response{status, {{"Content-Type", "application/problem+json"}}, body.dump()};
}

namespace {

// The answer when the handler threw: its record was released, so the same key may be retried.
response handler_failed_answer() {
  return problem(500, "Internal error", "The request failed and may be retried with the same key.");
}

}  // namespace

namespace {

static_scope endpoint_scope(std::string_view scope) {
  if (std::string why = scope_problem(scope); !why.empty()) throw configuration_error("endpoint scope: " + why);
  return static_scope(scope);
}

}  // namespace

endpoint::endpoint(engine& eng, endpoint_options options)
    : engine_(eng), options_(std::move(options)), scope_(endpoint_scope(options_.scope)) {
  options_.protocol.validate();
  // The engine's own rules for ttl, lease and waitTimeout, checked now rather than on a request.
  static_cast<void>(engine_.make_context(scope_, "configuration-check", options_.call));
}

endpoint::~endpoint() = default;

decision endpoint::admit(const request_view& head) const {
  const protocol_options& o = options_.protocol;
  const std::vector<std::string_view> values = head.header(o.key_header);
  if (values.empty()) {
    if (!o.key_required) return pass_through{};
    return problem(400, "Idempotency key required", "This endpoint requires the " + o.key_header + " header.");
  }
  if (values.size() > 1)
    return problem(400, "Invalid idempotency key", "The " + o.key_header + " header must appear once.");
  key_parse_result parsed = parse_key(values.front());
  if (!parsed.ok()) return problem(400, "Invalid idempotency key", "The " + o.key_header + " header: " + parsed.problem + ".");
  return claim{std::move(parsed.key)};
}

std::size_t endpoint::max_body_bytes() const noexcept { return options_.protocol.max_body_bytes; }

response endpoint::too_large() const {
  return problem(413, "Request body too large",
                 "The body exceeds " + std::to_string(options_.protocol.max_body_bytes) + " bytes.");
}

// One guarded request, from its key to its answer: the steps that the blocking run() and the
// asynchronous async_run() take alike, so that every rule is written once.
class endpoint::guarded_call {
 public:
  guarded_call(const endpoint& ep, const claim& c) : ep_(ep), o_(ep.options_.protocol), key_(c.key) {}

  // The record's context from the key, the tenant and the request's fingerprint; or the answer
  // when that fails.
  std::optional<response> prepare(const request_view& request) {
    std::string record_key = key_;
    std::string fingerprint_bytes;
    try {
      if (o_.tenant) {
        const std::string tenant = o_.tenant(request);
        const auto digest = sha256(std::to_string(tenant.size()) + ':' + tenant + key_);
        record_key = to_hex(digest.data(), digest.size());
      }
      if (o_.fingerprint) {
        fingerprint_bytes = o_.fingerprint(request);
      } else {
        fingerprint_bytes.reserve(request.method().size() + request.target().size() + request.body().size() + 2);
        fingerprint_bytes.append(request.method()).append(1, '\n').append(request.target()).append(1, '\n');
        fingerprint_bytes.append(request.body());
      }
    } catch (const std::exception& e) {
      report(log_level::error, std::string(ep_.options_.scope) +
                                   ": the tenant resolver or fingerprint function threw: " +
                                   replace_all(e.what(), key_, "#<key>"));
      return problem(500, "Internal error", "The request could not be processed.");
    }
    const auto fp_digest = sha256(fingerprint_bytes);
    try {
      ctx_.emplace(ep_.engine_.make_context(ep_.scope_, std::move(record_key), ep_.options_.call,
                                            to_hex(fp_digest.data(), fp_digest.size())));
    } catch (const std::exception& e) {  // validated at construction; only a broken invariant lands here
      report(log_level::error, ep_.options_.scope + ": cannot build the context: " + e.what());
      return problem(500, "Internal error", "The request could not be processed.");
    }
    return std::nullopt;
  }

  const context& ctx() const { return *ctx_; }

  // The handler is about to run.
  void started() noexcept { ran_ = true; }
  // The handler threw (its record is released: a retry runs it again).
  void handler_failed() noexcept { handler_threw_ = true; }

  // What the handler answered becomes the first caller's answer; returns what is stored for
  // replay. Throws not_stored for a 5xx that is not to be stored (the record is released).
  payload answered(response r) {
    first_ = std::move(r);
    erase_named(first_, replay_marker);  // only idem says a response is a replay
    if (first_.status >= 500 && !o_.store_server_errors) throw not_stored{};
    response stored = first_;
    strip_hop_by_hop(stored);
    o_.sanitize(stored);
    erase_named(stored, replay_marker);
    return encode_response(stored);
  }

  // An asynchronous handler answered with `r` or failed with `error`; only its first answer counts
  // (false for a later one). `outcome` becomes what the action finishes with: the handler's
  // error, not_stored for a 5xx that is not stored, or null with the payload kept for take_stored().
  bool handler_answered(std::exception_ptr error, response r, std::exception_ptr& outcome) {
    if (handler_answered_.exchange(true)) return false;
    if (error) {
      handler_failed();
      outcome = std::move(error);
      return true;
    }
    try {
      stored_ = answered(std::move(r));
    } catch (...) {
      outcome = std::current_exception();
    }
    return true;
  }
  payload take_stored() { return std::move(stored_); }

  // The answer once the engine said what happened.
  response executed() { return std::move(first_); }
  response replayed(const payload& value) {
    if (value.is_none()) {  // completed by a non-HTTP caller sharing the scope
      response r{204, {}, {}};
      r.headers.push_back({std::string(replay_marker), "true"});
      return r;
    }
    try {
      response r = decode_response(value);
      r.headers.push_back({std::string(replay_marker), "true"});
      return r;
    } catch (const corrupt_record_error& e) {
      report(log_level::error, record() + ": cannot replay: " + e.what());
      return problem(500, "Stored response unreadable", "The stored response for this key cannot be replayed.");
    }
  }
  response busy(const in_flight& answer) const {
    return with_retry_after(problem(o_.in_flight_status, "Request in progress",
                                    "A request with this key is still being processed; retry later."),
                            answer.retry_after);
  }

  // The answer when the engine ended with `error`.
  response failed(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const not_stored&) {
      return std::move(first_);  // a 5xx: the record was released, a retry can succeed
    } catch (const fingerprint_mismatch_error&) {
      return problem(422, "Idempotency key reused", "This key was already used with a different request.");
    } catch (const std::exception& e) {
      const std::string what = replace_all(e.what(), key_, ctx_->id.masked_key());
      if (handler_threw_) {
        report(log_level::error, record() + ": the handler threw (record released, answered 500): " + what);
        return handler_failed_answer();
      }
      if (ran_) {
        report(log_level::error, record() + ": the handler answered but its response could not be recorded: " + what);
        return problem(500, "Response not recorded",
                       "The request was processed but its response could not be recorded.");
      }
      report(log_level::error, record() + ": the idempotency store failed: " + what);
      return problem(503, "Idempotency store unavailable", "The request was not processed; retry later.");
    } catch (...) {
      if (handler_threw_) {
        report(log_level::error, record() + ": the handler threw a non-std exception (record released, answered 500)");
        return handler_failed_answer();
      }
      report(log_level::error, record() + ": unknown failure");
      return problem(500, "Internal error", "The request could not be processed.");
    }
  }

 private:
  void report(log_level level, std::string message) const noexcept {
    if (!o_.log) return;
    try {
      o_.log(log_record{level, "idem http: " + message});
    } catch (...) {  // a sink that throws is ignored
    }
  }
  std::string record() const { return ctx_->id.to_string(); }  // only for log lines: it costs a SHA-256

  const endpoint& ep_;
  const protocol_options& o_;
  const std::string key_;  // client data: never logged
  std::optional<context> ctx_;
  response first_;
  bool ran_ = false;
  bool handler_threw_ = false;
  std::atomic<bool> handler_answered_{false};  // asynchronous calls: the handler answered
  payload stored_;                             // asynchronous calls: what the answer stores
};

response endpoint::run(const claim& c, const request_view& request, function_ref<response()> handler) const {
  guarded_call call(*this, c);
  if (std::optional<response> refused = call.prepare(request)) return std::move(*refused);
  auto action = [&]() -> payload {
    call.started();
    response r;
    try {
      r = handler();
    } catch (...) {
      call.handler_failed();
      throw;
    }
    return call.answered(std::move(r));
  };
  try {
    outcome<payload> result = engine_.execute<payload>(call.ctx(), action, payload_codec{});
    if (std::holds_alternative<executed<payload>>(result)) return call.executed();
    if (auto* replay = std::get_if<replayed<payload>>(&result)) return call.replayed(replay->value);
    return call.busy(std::get<in_flight>(result));
  } catch (...) {
    return call.failed(std::current_exception());
  }
}

void endpoint::async_run(const claim& c, const request_view& request, async_response_handler handler,
                         std::function<void(response)> done) const {
  auto call = std::make_shared<guarded_call>(*this, c);
  if (std::optional<response> refused = call->prepare(request)) return done(std::move(*refused));
  // What the handler's answer stores is made when it answers (a 5xx not to be stored fails the
  // action there, so that the record is released as run() releases it).
  async_action action = [call, handler = std::move(handler)](async_done finished) {
    call->started();
    auto answer = [call, finished](std::exception_ptr error, response r) {
      std::exception_ptr outcome;
      if (call->handler_answered(std::move(error), std::move(r), outcome)) finished(std::move(outcome));
    };
    try {
      handler(answer);
    } catch (...) {
      answer(std::current_exception(), response{});
    }
  };
  engine_.async_run(call->ctx(), std::move(action), [call] { return call->take_stored(); }, nullptr,
                    [call, done = std::move(done)](std::exception_ptr error, raw_outcome raw) {
                      if (error) return done(call->failed(error));
                      if (std::holds_alternative<acquired>(raw)) return done(call->executed());
                      if (auto* d = std::get_if<duplicate>(&raw)) return done(call->replayed(d->value));
                      done(call->busy(std::get<in_flight>(raw)));
                    });
}

}  // namespace idem::http
