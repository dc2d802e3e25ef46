// tests/postgres/postgres_required_coroutine_test.cpp — a coroutine method with transaction =
// "required" and join-transaction on the fixture's PostgreSQL: its order row and its record
// commit together in the transaction its wrapper began, or neither does, and the transaction's
// COMMIT does not run on the coroutine's thread.
#include <catch2/catch.hpp>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <idem/engine.hpp>
#include <idem/postgres_store.hpp>

#include "postgres_test_support.hpp"
#include "required_coroutine.idem.hpp"

namespace asio = boost::asio;
using idem::pg_test::raw_connection;

namespace {

// The thread each record's completion was reported on: with join-transaction, the thread that ran
// the transaction's COMMIT (the record completes with it).
class completion_threads : public idem::lifecycle_listener {
 public:
  void on_completed(const idem::context&, const idem::lease_token&, const idem::payload&) override {
    std::lock_guard lock(mutex_);
    threads_.push_back(std::this_thread::get_id());
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard lock(mutex_);
    return threads_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::thread::id> threads_;
};

}  // namespace

TEST_CASE("a coroutine's required transaction commits its write and its record together, or neither",
          "[postgres][transaction][async]") {
  idem::pg_test::ensure_schema();
  idem::postgres_store store(idem::pg_test::store_options("required-coroutine"));
  const auto completions = std::make_shared<completion_threads>();
  idem::engine engine(store, {}, {.listeners = {completions}});
  raw_connection db;
  const std::string table = idem::pg_test::unique_name("entries");
  db.query("CREATE TABLE " + table + " (id text PRIMARY KEY, amount bigint NOT NULL)");
  const auto rows = [&] { return std::stoll(db.scalar("SELECT count(*) FROM " + table)); };
  const auto recorded = [&](const std::string& key) {
    const auto record = store.inspect_record(idem::identity("postgres_tab.post", key), false);
    return record && record->state == idem::record_state::completed;
  };
  idem::postgres_transaction_source transactions{db.get()};
  idem::guarded<ledger_test::postgres_tab> tab{engine, transactions, db.get(), table};
  const std::string kept = idem::pg_test::unique_name("kept");
  const std::string declined = idem::pg_test::unique_name("declined");

  asio::io_context io;
  std::thread::id coroutine_thread;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        coroutine_thread = std::this_thread::get_id();
        // Awaited outside CHECK: GCC evaluates a co_await in Catch's CHECK more than once.
        const long posted = co_await tab.post(kept, 5);
        CHECK(posted == 5);
        CHECK(tab.posts == 1);
        CHECK(rows() == 1);
        CHECK(recorded(kept));
        CHECK(idem::current_transaction() == nullptr);
        const long replayed = co_await tab.post(kept, 9);  // replayed: no second row
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
      asio::detached);
  io.run();
  CHECK(rows() == 1);  // the declined rows rolled back with their records
  CHECK_FALSE(recorded(declined));
  CHECK(tab.posts == 3);  // the declined key was released each time: its retry ran
  // COMMIT ran on idem's threads, not on the coroutine's (the io_context's only thread).
  const auto committed_on = completions->threads();
  REQUIRE(committed_on.size() == 1);
  CHECK(committed_on.front() != coroutine_thread);
}
