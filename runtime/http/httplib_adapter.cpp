// The cpp-httplib adapter: request_view over httplib::Request, the body read through a
// ContentReader (stopping after limit + 1 bytes), and the conversions between
// httplib::Response and idem::http::response. Everything else is endpoint's.
#include <idem/errors.hpp>
#include <idem/http/httplib.hpp>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace idem::http {
namespace {

class httplib_request final : public request_view {
 public:
  explicit httplib_request(const httplib::Request& req) : req_(req) {}
  std::string_view method() const noexcept override { return req_.method; }
  std::string_view target() const noexcept override { return req_.target; }
  std::string_view body() const noexcept override { return req_.body; }
  std::vector<std::string_view> header(std::string_view name) const override {
    std::vector<std::string_view> values;
    auto [first, last] = req_.headers.equal_range(std::string(name));  // httplib compares case-insensitively
    for (auto it = first; it != last; ++it) values.emplace_back(it->second);
    return values;
  }

 private:
  const httplib::Request& req_;
};

// The handler's answer as an idem response. A streamed answer (a content provider) cannot be
// recorded: it is dropped and reported as a handler failure (500, record released).
response take(httplib::Response& res) {
  if (res.content_provider_) {
    res.content_provider_ = nullptr;
    res.content_length_ = 0;
    res.is_chunked_content_provider_ = false;
    throw std::logic_error("a guarded handler must answer with set_content, not a content provider");
  }
  response r;
  r.status = res.status == -1 ? 200 : res.status;
  r.headers.reserve(res.headers.size());
  for (auto& [name, value] : res.headers) r.headers.push_back({name, value});
  r.body = std::move(res.body);
  return r;
}

void put(httplib::Response& res, response r) {
  res.status = r.status;
  res.headers.clear();
  for (auto& h : r.headers) res.headers.emplace(std::move(h.name), std::move(h.value));
  res.body = std::move(r.body);
}

// An answer given without reading the whole body: the rest of it is still on the connection,
// so the connection must not carry another request. cpp-httplib 0.11 decides keep-alive from the
// request's Connection header when it writes the response, so that is where `close` goes.
// A Connection header the client sent ("keep-alive") is replaced: cpp-httplib reads the first.
void put_and_close(const httplib::Request& req, httplib::Response& res, response r) {
  put(res, std::move(r));
  auto& headers = const_cast<httplib::Request&>(req).headers;
  headers.erase("Connection");
  headers.emplace("Connection", "close");
  res.set_header("Connection", "close");
}

enum class read_result { complete, too_large, failed };

// Reads the body into req.body, stopping once it holds more than `limit` bytes. cpp-httplib
// hands its handler a const Request it owns as a mutable object; the adapter fills its body the
// way httplib's own non-reader handlers find it filled.
read_result read_body(const httplib::Request& req, const httplib::ContentReader* reader, std::size_t limit) {
  if (reader == nullptr) return req.body.size() > limit ? read_result::too_large : read_result::complete;
  std::string& body = const_cast<httplib::Request&>(req).body;
  bool over = false;
  const bool ok = (*reader)([&](const char* data, std::size_t size) {
    const std::size_t take = std::min(size, limit + 1 - body.size());
    body.append(data, take);
    if (body.size() > limit) {
      over = true;
      return false;  // stop reading: at most limit + 1 bytes held
    }
    return true;
  });
  if (over) return read_result::too_large;
  return ok ? read_result::complete : read_result::failed;
}

void read_all(const httplib::Request& req, const httplib::ContentReader* reader) {
  if (reader == nullptr) return;
  std::string& body = const_cast<httplib::Request&>(req).body;
  (*reader)([&](const char* data, std::size_t size) {
    body.append(data, size);
    return true;
  });
}

// Reads and drops the body of a rejected request, at most `limit` + 1 bytes, so that a
// keep-alive connection stays usable. Returns false if bytes were left unread.
bool discard_body(const httplib::ContentReader* reader, std::size_t limit) {
  if (reader == nullptr) return true;
  std::size_t seen = 0;
  return (*reader)([&](const char*, std::size_t size) {
    seen += size;
    return seen <= limit;
  });
}

void serve(const endpoint& ep, const httplib_handler& handler, const httplib::Request& req, httplib::Response& res,
           const httplib::ContentReader* reader) {
  const httplib_request view{req};
  decision d = ep.admit(view);
  if (std::holds_alternative<pass_through>(d)) {
    read_all(req, reader);
    handler(req, res);
    return;
  }
  if (auto* reject = std::get_if<response>(&d)) {
    if (discard_body(reader, ep.max_body_bytes()))
      put(res, std::move(*reject));
    else
      put_and_close(req, res, std::move(*reject));
    return;
  }
  switch (read_body(req, reader, ep.max_body_bytes())) {
    case read_result::too_large:
      put_and_close(req, res, ep.too_large());
      return;
    case read_result::failed:
      put_and_close(req, res, problem(400, "Unreadable request body", "The request body could not be read."));
      return;
    case read_result::complete:
      break;
  }
  put(res, ep.run(std::get<claim>(d), view, [&]() -> response {
    handler(req, res);
    return take(res);
  }));
}

}  // namespace

void apply_limits(httplib::Server& server, const httplib_limits& limits) {
  if (limits.threads == 0 || limits.keep_alive_max == 0 || limits.max_header_count == 0)
    throw configuration_error(
        "idem::http::apply_limits: threads, keep_alive_max and max_header_count must each be at least 1");
  server.new_task_queue = [threads = limits.threads] { return new httplib::ThreadPool(threads); };
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(limits.keep_alive_max);
  server.set_pre_routing_handler([max = limits.max_header_count](const httplib::Request& req, httplib::Response& res) {
    if (req.headers.size() <= max) return httplib::Server::HandlerResponse::Unhandled;
    // Before the route reads the body: the connection must not carry another request.
    put_and_close(req, res, problem(431, "Request header fields too large", "The request has too many header fields."));
    return httplib::Server::HandlerResponse::Handled;
  });
}

std::shared_ptr<const endpoint> guard(httplib::Server& server, std::string_view method, std::string pattern,
                                      engine& eng, endpoint_options options, httplib_handler handler) {
  if (!handler) throw configuration_error("idem::http::guard: the handler is empty");
  auto ep = std::make_shared<const endpoint>(eng, std::move(options));
  auto with_reader = [ep, handler](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) { serve(*ep, handler, req, res, &reader); };
  if (method == "POST")
    server.Post(pattern, with_reader);
  else if (method == "PUT")
    server.Put(pattern, with_reader);
  else if (method == "PATCH")
    server.Patch(pattern, with_reader);
  else if (method == "DELETE")
    server.Delete(pattern, with_reader);
  else if (method == "GET")
    server.Get(pattern, [ep, handler](const httplib::Request& req, httplib::Response& res) {
      serve(*ep, handler, req, res, nullptr);
    });
  else
    throw configuration_error("idem::http::guard: method \"" + std::string(method) +
                              "\" is not one of POST, PUT, PATCH, DELETE, GET");
  return ep;
}

}  // namespace idem::http
