// tests/sqlite/sqlite_required_coroutine_test.cpp — a coroutine method with transaction =
// "required" and join-transaction on a real SQLite file: its row and its record commit together or
// neither does, and the transaction's BEGIN, COMMIT and ROLLBACK never run on the coroutine's
// thread (the connection's statement trace says which thread ran each).
#include <catch2/catch.hpp>

#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <sqlite3.h>

#include <idem/engine.hpp>
#include <idem/sqlite_store.hpp>

#include "required_coroutine.idem.hpp"
#include "sqlite_test_support.hpp"

namespace asio = boost::asio;

namespace {

// The statements a connection ran, each with the thread that ran it.
class statement_trace {
 public:
  explicit statement_trace(sqlite3* db) { sqlite3_trace_v2(db, SQLITE_TRACE_STMT, &statement_trace::record, this); }

  // The threads that ran a statement starting with `verb` (BEGIN, COMMIT, ROLLBACK).
  std::vector<std::thread::id> threads_of(std::string_view verb) const {
    std::lock_guard lock(mutex_);
    std::vector<std::thread::id> threads;
    for (const auto& [sql, thread] : statements_)
      if (sql.starts_with(verb)) threads.push_back(thread);
    return threads;
  }

 private:
  static int record(unsigned, void* self, void*, void* sql) {
    auto* trace = static_cast<statement_trace*>(self);
    std::lock_guard lock(trace->mutex_);
    trace->statements_.emplace_back(static_cast<const char*>(sql), std::this_thread::get_id());
    return 0;
  }

  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, std::thread::id>> statements_;
};

}  // namespace

TEST_CASE("a coroutine's required transaction on SQLite commits its row and record together, off the coroutine's "
          "thread",
          "[sqlite][transaction][async]") {
  const auto path = idem::sqlite_test::fresh_db_path("required-coroutine");
  idem::sqlite_store store(idem::sqlite_test::options_for(path));
  idem::engine engine(store);
  auto db = idem::sqlite_test::open_connection(path);
  idem::sqlite_test::exec(db.get(), "CREATE TABLE entries (id TEXT PRIMARY KEY, amount INTEGER)");
  const auto rows = [&] { return idem::sqlite_test::query_int(db.get(), "SELECT count(*) FROM entries"); };
  const auto recorded = [&](const std::string& key) {
    const auto record = store.inspect_record(idem::identity("sqlite_tab.post", key), false);
    return record && record->state == idem::record_state::completed;
  };
  statement_trace trace(db.get());
  idem::sqlite_transaction_source transactions{db.get()};
  idem::guarded<ledger_test::sqlite_tab> tab{engine, transactions, db.get()};

  asio::io_context io;
  std::thread::id coroutine_thread;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        coroutine_thread = std::this_thread::get_id();
        // Awaited outside CHECK: GCC evaluates a co_await in Catch's CHECK more than once.
        const long posted = co_await tab.post("kept", 5);
        CHECK(posted == 5);
        CHECK(rows() == 1);
        CHECK(recorded("kept"));
        const long replayed = co_await tab.post("kept", 9);  // replayed: no second row
        CHECK(replayed == 5);
        bool refused = false;
        try {
          (void)co_await tab.post("declined", -1);
        } catch (const std::runtime_error&) {
          refused = true;
        }
        CHECK(refused);
      },
      asio::detached);
  io.run();
  CHECK(rows() == 1);  // the declined row rolled back with its record
  CHECK_FALSE(recorded("declined"));
  CHECK(tab.posts == 2);

  // Three transactions (the replay's too: begun before the claim), two commits, one rollback.
  for (const auto& [verb, count] : {std::pair{"BEGIN", 3U}, {"COMMIT", 2U}, {"ROLLBACK", 1U}}) {
    INFO(verb);
    const auto threads = trace.threads_of(verb);
    CHECK(threads.size() == count);
    for (const auto thread : threads) CHECK(thread != coroutine_thread);
  }
}
