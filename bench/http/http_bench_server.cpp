// bench/http/http_bench_server.cpp — the same handler twice on one server: POST /unguarded
// (plain) and POST /guarded (idem::http::guard), for wrk (see run.sh). The server is cpp-httplib
// (64 worker threads) or, with --server beast, Boost.Beast on one io_context thread, guarded
// asynchronously, a Redis store reading its replies on that thread (redis_store_options::event_loop).
//
//   idem_bench_http_server [--store memory | redis:HOST:PORT | redis-cache:HOST:PORT] [--server httplib | beast]
//
// Prints `listening on 127.0.0.1:PORT` first. The handler does what a small JSON endpoint does:
// parse the body, make an id, answer 201 with JSON and a Location.
#include <idem/engine.hpp>
#include <idem/http/httplib.hpp>
#include <idem/lease_token.hpp>
#include <idem/memory_store.hpp>
#ifdef IDEM_BENCH_WITH_REDIS
#include <idem/redis_store.hpp>
#endif

#ifdef IDEM_BENCH_WITH_BEAST
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <idem/asio_event_loop.hpp>
#include <idem/http/beast_server.hpp>
#endif

#include <nlohmann/json.hpp>
#include <sys/socket.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

namespace {

// The handler, whichever server runs it: status, Location and a JSON body.
struct created {
  int status = 400;
  std::string location;
  std::string body;
};

created make_payment(std::string_view text) {
  const nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
  if (!body.is_object() || !body.contains("amount")) return {};
  const std::string id = "pay_" + idem::lease_token::generate().to_string().substr(0, 12);
  return {201, "/payments/" + id,
          nlohmann::json{{"id", id}, {"amount", body["amount"]}, {"currency", body.value("currency", "EUR")}}.dump()};
}

void create(const httplib::Request& req, httplib::Response& res) {
  const created c = make_payment(req.body);
  res.status = c.status;
  if (c.status != 201) return;
  res.set_header("Location", c.location);
  res.set_content(c.body, "application/json");
}

#ifdef IDEM_BENCH_WITH_BEAST
namespace asio = boost::asio;
using idem::http::beast::request_type;
using idem::http::beast::response_type;

asio::awaitable<response_type> create_beast(const request_type& req) {
  const created c = make_payment(req.body());
  response_type res{static_cast<boost::beast::http::status>(c.status), 11};
  if (c.status == 201) {
    res.set(boost::beast::http::field::location, c.location);
    res.set(boost::beast::http::field::content_type, "application/json");
    res.body() = c.body;
  }
  co_return res;
}

int serve_beast(asio::io_context& io, idem::engine& engine, const sigset_t& stop) {
  idem::http::beast::router routes;
  routes.add("POST", "/unguarded", create_beast);
  routes.add("POST", "/guarded",
             std::make_shared<const idem::http::endpoint>(engine, idem::http::endpoint_options{"Bench.create", {}, {}}),
             create_beast);
  asio::ip::tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  acceptor.listen(512);
  std::printf("listening on 127.0.0.1:%d\n", static_cast<int>(acceptor.local_endpoint().port()));
  std::fflush(stdout);
  asio::co_spawn(io, idem::http::beast::serve(acceptor, routes), asio::detached);
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop, &signal);
    io.stop();
  });
  io.run();
  stopper.join();
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "memory";
  std::string server_kind = "httplib";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--store") {
      spec = argv[i + 1];
    } else if (flag == "--server") {
      server_kind = argv[i + 1];
    } else {
      std::cerr << "idem_bench_http_server: unknown argument " << flag << "\n";
      return 2;
    }
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

#ifdef IDEM_BENCH_WITH_BEAST
  // The Beast server's one thread; a Redis store reads its replies there too (event_loop).
  asio::io_context io{1};
#endif
  std::unique_ptr<idem::store> store;
  if (spec == "memory") {
    store = std::make_unique<idem::memory_store>();
#ifdef IDEM_BENCH_WITH_REDIS
  } else if (spec.rfind("redis:", 0) == 0 || spec.rfind("redis-cache:", 0) == 0) {
    idem::redis_store_options o;
    const std::string address = spec.substr(spec.find(':') + 1);
    // redis-cache: completed records are also kept in the store's local cache, so a replay
    // on this process needs no round trip.
    if (spec.rfind("redis-cache:", 0) == 0) o.local_cache.max_entries = 100000;
    o.host = address.substr(0, address.rfind(':'));
    o.port = std::stoi(address.substr(address.rfind(':') + 1));
#ifdef IDEM_BENCH_WITH_BEAST
    if (server_kind == "beast") o.event_loop = std::make_shared<idem::asio::event_loop>(io);
#endif
    store = std::make_unique<idem::redis_store>(o);
#endif
  } else {
    std::cerr << "idem_bench_http_server: unknown store " << spec << "\n";
    return 2;
  }
  idem::engine engine{*store};
#ifdef IDEM_BENCH_WITH_BEAST
  if (server_kind == "beast") return serve_beast(io, engine, stop);
#endif
  if (server_kind != "httplib") {
    std::cerr << "idem_bench_http_server: unknown server " << server_kind << "\n";
    return 2;
  }

  httplib::Server server;
  // 64 workers, as measured in docs/benchmarks.md; wrk keeps its connections, so does a real client.
  idem::http::apply_limits(server, {.threads = 64, .keep_alive_max = 1000000});
  socket_t listener = INVALID_SOCKET;
  server.set_socket_options([&listener](socket_t sock) {
    httplib::default_socket_options(sock);
    listener = sock;
  });
  server.Post("/unguarded", create);
  idem::http::endpoint_options options{"Bench.create", {}, {}};
  idem::http::guard(server, "POST", "/guarded", engine, options, create);

  const int port = server.bind_to_any_port("127.0.0.1");
  if (port <= 0) return 1;
  ::listen(listener, 512);
  std::printf("listening on 127.0.0.1:%d\n", port);
  std::fflush(stdout);
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop, &signal);
    server.stop();
  });
  server.listen_after_bind();
  stopper.join();
  return 0;
}
