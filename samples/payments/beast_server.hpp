// samples/payments/beast_server.hpp — the payments API served by Boost.Beast (--server beast).
#pragma once

#include <csignal>

#include <boost/asio/io_context.hpp>

#include <idem/engine.hpp>
#include <idem/metrics.hpp>

#include "payment_controller.hpp"

namespace payments {

// Serves the API on 127.0.0.1:`port` (0: a free one) with `threads` threads running `io` until one
// of `stop_signals` arrives (they are blocked in every thread: sigwait takes them). Prints
// `listening on 127.0.0.1:PORT` first. Returns the process's exit code.
int serve_with_beast(boost::asio::io_context& io, idem::engine& engine, const idem::metrics& metrics, PaymentController& controller, int port,
                     int threads, const sigset_t& stop_signals);

}  // namespace payments
