// tests/sqlite/required_coroutine.hpp — a coroutine method in a transaction its generated wrapper
// begins bound to no thread (transaction = "required") and writes its record inside it
// (completion = "join-transaction"), on the application's own SQLite connection.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/json_codec.hpp>
#include <idem/sqlite_transaction.hpp>

namespace ledger_test {

class sqlite_tab {
 public:
  explicit sqlite_tab(sqlite3* db) : db_(db) {}
  virtual ~sqlite_tab() = default;

  // Inserts (id, amount) into `entries`, suspends, then returns the amount, or throws after the
  // write when the amount is negative.
  [[idem::idempotent(key = "id", completion = "join-transaction", transaction = "required",
                     codec = "idem::json_codec")]]
  virtual boost::asio::awaitable<long> post(std::string id, long amount) {
    ++posts;
    insert(id, amount);
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(1));
    co_await timer.async_wait(boost::asio::use_awaitable);
    if (amount < 0) throw std::runtime_error("declined");
    co_return amount;
  }

  int posts = 0;

 private:
  void insert(const std::string& id, long amount);

  sqlite3* db_;
};

}  // namespace ledger_test
