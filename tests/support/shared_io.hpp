// tests/support/shared_io.hpp — one io_context for every store of a test binary that is handed the
// caller's event loop (options.event_loop), run by a thread of its own for the binary's life.
#pragma once

#include <memory>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <idem/asio_event_loop.hpp>

namespace idem::test {

inline std::shared_ptr<idem::event_loop> shared_test_event_loop() {
  struct shared_io {
    boost::asio::io_context io;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work = boost::asio::make_work_guard(io);
    std::shared_ptr<idem::asio::event_loop> loop = std::make_shared<idem::asio::event_loop>(io);
    std::thread runner{[this] { io.run(); }};
    ~shared_io() {
      work.reset();
      runner.join();
    }
  };
  static shared_io shared;
  return shared.loop;
}

}  // namespace idem::test
