// bench/http/http_bench_server.cpp — the same handler twice on one cpp-httplib server:
// POST /unguarded (plain) and POST /guarded (idem::http::guard), for wrk (see run.sh).
//
//   idem_bench_http_server [--store memory | redis:HOST:PORT | redis-cache:HOST:PORT]
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

#include <nlohmann/json.hpp>
#include <sys/socket.h>

#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

namespace {

void create(const httplib::Request& req, httplib::Response& res) {
  const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("amount")) {
    res.status = 400;
    return;
  }
  const std::string id = "pay_" + idem::lease_token::generate().to_string().substr(0, 12);
  res.status = 201;
  res.set_header("Location", "/payments/" + id);
  res.set_content(nlohmann::json{{"id", id}, {"amount", body["amount"]}, {"currency", body.value("currency", "EUR")}}.dump(),
                  "application/json");
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = argc >= 3 && std::string(argv[1]) == "--store" ? argv[2] : "memory";
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

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
    store = std::make_unique<idem::redis_store>(o);
#endif
  } else {
    std::cerr << "idem_bench_http_server: unknown store " << spec << "\n";
    return 2;
  }
  idem::engine engine{*store};

  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(64); };
  server.set_keep_alive_max_count(1000000);  // wrk keeps its connections; so does a real client
  server.set_tcp_nodelay(true);
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
