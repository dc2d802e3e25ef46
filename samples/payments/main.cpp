// samples/payments — an HTTP payments API whose POST /payments is idempotent.
//
//   idem_sample_payments [--port N] [--store memory | sqlite:PATH | postgres:CONNINFO | redis:HOST:PORT]
//
// The first line printed is `listening on 127.0.0.1:PORT` (with --port 0, a free port). SIGINT
// or SIGTERM stops the server. See README.md, "HTTP endpoints", for curl sessions against it.
#include "payment_controller.hpp"

#include <idem/engine.hpp>
#include <idem/memory_store.hpp>
#ifdef IDEM_SAMPLE_WITH_SQLITE
#include <idem/sqlite_store.hpp>
#endif
#ifdef IDEM_SAMPLE_WITH_POSTGRES
#include <idem/postgres_store.hpp>
#endif
#ifdef IDEM_SAMPLE_WITH_REDIS
#include <idem/redis_store.hpp>
#endif

#include <sys/socket.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

namespace {

constexpr const char* usage_stores = "memory"
#ifdef IDEM_SAMPLE_WITH_SQLITE
                                     " | sqlite:PATH"
#endif
#ifdef IDEM_SAMPLE_WITH_POSTGRES
                                     " | postgres:CONNINFO"
#endif
#ifdef IDEM_SAMPLE_WITH_REDIS
                                     " | redis:HOST:PORT"
#endif
    ;

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "idem_sample_payments: " << why << "\nusage: idem_sample_payments [--port N] [--store "
            << usage_stores << "]\n";
  std::exit(2);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::unique_ptr<idem::store> open_store(const std::string& spec) {
  if (spec == "memory") return std::make_unique<idem::memory_store>();
#ifdef IDEM_SAMPLE_WITH_SQLITE
  if (starts_with(spec, "sqlite:")) return std::make_unique<idem::sqlite_store>(std::filesystem::path(spec.substr(7)));
#endif
#ifdef IDEM_SAMPLE_WITH_POSTGRES
  if (starts_with(spec, "postgres:")) {
    idem::postgres_store_options o;
    o.conninfo = spec.substr(9);
    o.application_name = "idem_sample_payments";
    auto s = std::make_unique<idem::postgres_store>(o);
    s->create_schema();
    return s;
  }
#endif
#ifdef IDEM_SAMPLE_WITH_REDIS
  if (starts_with(spec, "redis:")) {
    const std::string address = spec.substr(6);
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) usage("--store redis:HOST:PORT needs a port");
    idem::redis_store_options o;
    o.host = address.substr(0, colon);
    o.port = std::stoi(address.substr(colon + 1));
    return std::make_unique<idem::redis_store>(o);
  }
#endif
  usage("unknown store \"" + spec + "\"");
}

}  // namespace

int main(int argc, char** argv) {
  int port = 8080;
  std::string store_spec = "memory";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--port" || arg == "--store") && i + 1 >= argc) usage(arg + " needs a value");
    if (arg == "--port") {
      try {
        port = std::stoi(argv[++i]);
      } catch (const std::exception&) {
        usage("--port needs a number");
      }
      if (port < 0 || port > 65535) usage("--port must be 0..65535");
    } else if (arg == "--store") {
      store_spec = argv[++i];
    } else {
      usage("unknown argument " + arg);
    }
  }

  // Signals are taken by one thread with sigwait, which may call server.stop() safely.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    std::unique_ptr<idem::store> store = open_store(store_spec);
    idem::engine engine{*store};
    payments::PaymentController controller;

    httplib::Server server;
    server.new_task_queue = [] { return new httplib::ThreadPool(64); };
    server.set_tcp_nodelay(true);  // no Nagle delay between the header and body writes
    socket_t listener = INVALID_SOCKET;
    server.set_socket_options([&listener](socket_t sock) {
      httplib::default_socket_options(sock);
      listener = sock;
    });
    idem::http::route<&payments::PaymentController::create>(server, "POST", "/payments", engine, controller);
    server.Get("/payments", [&](const httplib::Request& req, httplib::Response& res) { controller.list(req, res); });
    server.Get(R"(/payments/([A-Za-z0-9_]+))",
               [&](const httplib::Request& req, httplib::Response& res) { controller.get(req, res); });

    const int bound = port == 0 ? server.bind_to_any_port("127.0.0.1") : (server.bind_to_port("127.0.0.1", port) ? port : -1);
    if (bound <= 0) {
      std::cerr << "idem_sample_payments: cannot listen on 127.0.0.1:" << port << "\n";
      return 1;
    }
    // cpp-httplib 0.11 listens with a backlog of 5; a burst of clients would see SYNs dropped.
    ::listen(listener, 512);
    std::printf("listening on 127.0.0.1:%d\n", bound);
    std::fflush(stdout);

    std::thread stopper([&] {
      int signal = 0;
      sigwait(&stop_signals, &signal);
      server.stop();
    });
    const bool ok = server.listen_after_bind();
    if (stopper.joinable()) {
      pthread_kill(stopper.native_handle(), SIGTERM);  // wakes sigwait if listen ended on its own
      stopper.join();
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "idem_sample_payments: " << e.what() << "\n";
    return 1;
  }
}
