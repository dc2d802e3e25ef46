// tests/support/required_tab_session.hpp — what each store's test of ledger_test::tab runs on one
// io_context thread, and what it checks: a first post, its replay, and a post that throws after its
// write, twice (its key released each time). The store's test checks the rows and records after.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <idem/transaction.hpp>

namespace ledger_test {

// The thread the session's coroutine ran on. `rows` counts the written rows, `recorded` says whether
// a key's record is complete. Awaits outside CHECK: GCC evaluates a co_await in Catch's CHECK more
// than once.
template <class GuardedTab>
std::thread::id run_session(GuardedTab& tab, const std::string& kept, const std::string& declined,
                            const std::function<long long()>& rows,
                            const std::function<bool(const std::string&)>& recorded) {
  boost::asio::io_context io;
  std::thread::id coroutine_thread;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        coroutine_thread = std::this_thread::get_id();
        const long posted = co_await tab.post(kept, 5);
        CHECK(posted == 5);
        CHECK(tab.posts == 1);
        CHECK(rows() == 1);
        CHECK(recorded(kept));
        CHECK(idem::current_transaction() == nullptr);  // never bound to the thread
        const long replayed = co_await tab.post(kept, 9);  // no second row
        CHECK(replayed == 5);
        for (int attempt = 0; attempt < 2; ++attempt) {
          bool refused = false;
          try {
            (void)co_await tab.post(declined, -1);
          } catch (const std::runtime_error&) {
            refused = true;
          }
          CHECK(refused);
        }
      },
      boost::asio::detached);
  io.run();
  CHECK(rows() == 1);  // the declined rows rolled back with their records
  CHECK_FALSE(recorded(declined));
  CHECK(tab.posts == 3);  // the declined key was released each time: its retry ran
  return coroutine_thread;
}

}  // namespace ledger_test
