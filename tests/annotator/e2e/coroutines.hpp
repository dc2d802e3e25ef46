// Coroutine methods: idem::guarded<Payments> overrides them with wrappers that co_await
// idem::async_execute; coroutines that no override can guard (a free function, a static member, a
// member of a final class) are guarded by idem::invoke (coroutine_test.cpp).
#pragma once

#include <stdexcept>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/json_codec.hpp>

#include "journal_book.hpp"

namespace shop {

struct Order {
  std::string id;
};

class Payments {
 public:
  virtual ~Payments() = default;

  // The key reads `order` (a reference) before the wrapper suspends; the body uses only `cents`,
  // which the wrapper's action owns.
  [[idem::idempotent(key = "order.id", codec = "idem::json_codec", waitTimeout = "PT10S")]]
  virtual boost::asio::awaitable<int> charge([[maybe_unused]] const Order& order, int cents) {
    ++charges;
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(20));
    co_await timer.async_wait(boost::asio::use_awaitable);
    co_return cents * 2;
  }

  // Non-virtual, no value, a by-value parameter the body reads after suspending.
  [[idem::idempotent(key = "note")]] boost::asio::awaitable<void> log(std::string note) {
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(5));
    co_await timer.async_wait(boost::asio::use_awaitable);
    logged += note;
  }

  int charges = 0;
  std::string logged;
};

// A coroutine in a transaction its wrapper begins (bound to no thread) and commits.
class Tab {
 public:
  explicit Tab(journal::book* b) : book_(b) {}
  virtual ~Tab() = default;

  // Writes `id` in the transaction open on the book, suspends, then answers (or throws after the
  // write when `id` is negative).
  [[idem::idempotent(key = "id", transaction = "required", codec = "idem::json_codec")]]
  virtual boost::asio::awaitable<int> add(int id) {
    ++adds;
    journal::open_on(*book_).write(id);
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(5));
    co_await timer.async_wait(boost::asio::use_awaitable);
    if (id < 0) throw std::runtime_error("declined");
    co_return id * 10;
  }

  int adds = 0;

 private:
  journal::book* book_;
};

// A coroutine on a concrete executor type instead of any_io_executor: a coroutine co_awaits only
// awaitables of its own executor type, so the wrapper's call completes on that type too.
class Ledger {
 public:
  using executor = boost::asio::io_context::executor_type;

  virtual ~Ledger() = default;

  [[idem::idempotent(key = "entry", codec = "idem::json_codec", waitTimeout = "PT10S")]]
  virtual boost::asio::awaitable<int, executor> post(int entry) {
    ++posts;
    boost::asio::basic_waitable_timer<std::chrono::steady_clock, boost::asio::wait_traits<std::chrono::steady_clock>,
                                      executor>
        timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(5));
    co_await timer.async_wait(boost::asio::use_awaitable_t<executor>{});
    co_return entry + 1;
  }

  // On a strand of any_io_executor (make_strand of a socket's executor), which has no
  // on_work_started.
  using strand = boost::asio::strand<boost::asio::any_io_executor>;
  [[idem::idempotent(key = "entry", codec = "idem::json_codec")]]
  virtual boost::asio::awaitable<int, strand> post_in_order(int entry) {
    ++posts;
    co_return entry + 2;
  }

  int posts = 0;
};

// Guarded by idem::invoke alone. The key reads `order` (a reference) before anything suspends; the
// body reads `reason`, a by-value parameter, after suspending.
inline int refunds = 0;
[[idem::idempotent(key = "order.id", codec = "idem::json_codec", waitTimeout = "PT10S")]]
inline boost::asio::awaitable<int> refund([[maybe_unused]] const Order& order, std::string reason) {
  ++refunds;
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(5));
  co_await timer.async_wait(boost::asio::use_awaitable);
  co_return static_cast<int>(reason.size());
}

// A reference parameter read after suspending: the caller's string must outlive the call
// (invoke_coroutine_temporary.cpp: a converted temporary does not compile).
inline std::string remembered;
[[idem::idempotent(key = "note")]] inline boost::asio::awaitable<void> remember(const std::string& note) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(5));
  co_await timer.async_wait(boost::asio::use_awaitable);
  remembered += note;
}

class Till final {
 public:
  [[idem::idempotent(key = "entry", codec = "idem::json_codec", waitTimeout = "PT10S")]]
  boost::asio::awaitable<int> ring(int entry) {
    ++rings;
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(5));
    co_await timer.async_wait(boost::asio::use_awaitable);
    co_return entry * 3;
  }

  // In a transaction its idem::invoke begins (bound to no thread) and commits.
  [[idem::idempotent(key = "entry", transaction = "required")]]
  static boost::asio::awaitable<void> record(journal::book& book, int entry) {
    journal::open_on(book).write(entry);
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(5));
    co_await timer.async_wait(boost::asio::use_awaitable);
  }

  int rings = 0;
};

}  // namespace shop
