// samples/payments/beast_server.cpp — the payments API on Boost.Beast (--server beast): the same
// routes and answers as the cpp-httplib server, on `threads` io_context threads (one by default);
// POST /payments is guarded asynchronously, so a duplicate's wait and a slow provider hold no
// thread.
#include "beast_server.hpp"

#include "beast_payments.hpp"
// The endpoint's policy, as main.cpp takes it.
#ifdef IDEM_SAMPLE_GENERATED_POLICY
#include "beast_payments.idem.hpp"
#else
#include "payment_controller_policy.hpp"
#endif

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/http/beast_server.hpp>
#include <idem/metrics.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

namespace payments {

namespace asio = boost::asio;
using idem::http::beast::request_type;
using idem::http::beast::response_type;

int serve_with_beast(asio::io_context& io, idem::engine& engine, const idem::metrics& metrics, PaymentController& controller, int port,
                     int threads, const sigset_t& stop_signals) {
  BeastPayments beast_payments{controller};
  idem::http::beast::router routes;
  idem::http::beast::route<&BeastPayments::create>(routes, "POST", "/payments", engine, beast_payments);
  routes.add("GET", "/metrics", [&metrics](const request_type&) -> asio::awaitable<response_type> {
    co_return to_response(
        reply{.status = 200, .content_type = std::string(idem::metrics::content_type), .body = metrics.render(), .location = {}});
  });
  routes.add("GET", "/payments", [&controller](const request_type&) -> asio::awaitable<response_type> {
    co_return to_response(controller.listing());
  });
  routes.add("GET", "/payments/*", [&controller](const request_type& req) -> asio::awaitable<response_type> {
    const std::string_view target = req.target();
    co_return to_response(controller.find(target.substr(std::string_view("/payments/").size())));
  });

  asio::ip::tcp::acceptor acceptor{io};
  boost::system::error_code ec;
  acceptor.open(asio::ip::tcp::v4(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
  if (!ec) acceptor.listen(512, ec);
  if (ec) {
    std::cerr << "idem_sample_payments: cannot listen on 127.0.0.1:" << port << ": " << ec.message() << "\n";
    return 1;
  }
  std::printf("listening on 127.0.0.1:%d\n", static_cast<int>(acceptor.local_endpoint().port()));
  std::fflush(stdout);

  asio::co_spawn(io, idem::http::beast::serve(acceptor, routes), asio::detached);
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    io.stop();
  });
  std::vector<std::thread> runners;
  for (int i = 1; i < threads; ++i) runners.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& r : runners) r.join();
  stopper.join();
  return 0;
}

}  // namespace payments
