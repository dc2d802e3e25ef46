// tests/support/required_tab.hpp — a coroutine method in a transaction its generated wrapper
// begins bound to no thread (transaction = "required"), writing its record inside it
// (completion = "join-transaction"). Its business write is the store test's own: an INSERT on the
// application's connection, the one the test's transaction_source begins on.
#pragma once

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/json_codec.hpp>

namespace ledger_test {

class tab {
 public:
  using writer = std::function<void(const std::string& id, long amount)>;
  explicit tab(writer insert) : insert_(std::move(insert)) {}
  virtual ~tab() = default;

  // Writes (id, amount), suspends, then returns the amount, or throws after the write when the
  // amount is negative.
  [[idem::idempotent(key = "id", completion = "join-transaction", transaction = "required",
                     codec = "idem::json_codec")]]
  virtual boost::asio::awaitable<long> post(std::string id, long amount) {
    ++posts;
    insert_(id, amount);
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(1));
    co_await timer.async_wait(boost::asio::use_awaitable);
    if (amount < 0) throw std::runtime_error("declined");
    co_return amount;
  }

  int posts = 0;

 private:
  writer insert_;
};

}  // namespace ledger_test
