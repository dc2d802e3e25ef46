// tests/sqlite/sqlite_required_coroutine_test.cpp — a coroutine method with transaction =
// "required" and join-transaction on a real SQLite file: its row and its record commit together or
// neither does, and the transaction's BEGIN, COMMIT and ROLLBACK never run on the coroutine's
// thread (the connection's statement trace says which thread ran each); the same for a transaction
// a coroutine begins and ends itself with idem::async_begin / async_commit / async_rollback.
#include <catch2/catch.hpp>

#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <sqlite3.h>

#include <idem/asio.hpp>
#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/json_codec.hpp>
#include <idem/sqlite_store.hpp>
#include <idem/sqlite_transaction.hpp>

#include "required_tab.idem.hpp"
#include "sqlite_test_support.hpp"
#include "support/faulty_store.hpp"
#include "support/required_tab_session.hpp"

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

// The application's connection to a fresh file with its `entries` table, a store on the same file,
// an engine on it (or, to watch its releases, on a decorator of it) and a guarded tab writing through
// the connection.
struct setup {
  enum store_seen { directly, watch_releases };

  explicit setup(std::string_view hint, store_seen seen = directly)
      : path(idem::sqlite_test::fresh_db_path(hint)),
        sqlite(idem::sqlite_test::options_for(path)),
        watched(sqlite),
        engine(seen == watch_releases ? static_cast<idem::store&>(watched) : sqlite),
        db(idem::sqlite_test::open_connection(path)),
        transactions(db.get()),
        tab(engine, transactions, [this](const std::string& id, long amount) {
          idem::sqlite_test::exec(db.get(), "INSERT INTO entries VALUES ('" + id + "', " + std::to_string(amount) + ")");
        }) {
    idem::sqlite_test::exec(db.get(), "CREATE TABLE entries (id TEXT PRIMARY KEY, amount INTEGER)");
  }

  // Runs ledger_test::run_session; returns the coroutine's thread.
  std::thread::id run() {
    return ledger_test::run_session(
        tab, "kept", "declined", [&] { return idem::sqlite_test::query_int(db.get(), "SELECT count(*) FROM entries"); },
        [&](const std::string& key) {
          const auto record = sqlite.inspect_record(idem::identity("tab.post", key), false);
          return record && record->state == idem::record_state::completed;
        });
  }

  std::filesystem::path path;
  idem::sqlite_store sqlite;
  idem::test::faulty_store watched;  // the releases seen on their way to `sqlite`
  idem::engine engine;
  idem::sqlite_test::connection db;
  idem::sqlite_transaction_source transactions;
  idem::guarded<ledger_test::tab> tab;
};

}  // namespace

TEST_CASE("a coroutine's required transaction on SQLite commits its row and record together, off the coroutine's "
          "thread",
          "[sqlite][transaction][async]") {
  setup s("required-coroutine");
  statement_trace trace(s.db.get());
  const std::thread::id coroutine_thread = s.run();

  // Four transactions (the replay's too: begun before the claim), two commits, two rollbacks.
  for (const auto& [verb, count] : {std::pair{"BEGIN", 4U}, {"COMMIT", 2U}, {"ROLLBACK", 2U}}) {
    INFO(verb);
    const auto threads = trace.threads_of(verb);
    CHECK(threads.size() == count);
    for (const auto thread : threads) CHECK(thread != coroutine_thread);
  }
}

TEST_CASE("a coroutine that wrote in its required transaction on SQLite and threw is released after the rollback, "
          "not behind the transaction's write lock",
          "[sqlite][transaction][async]") {
  // The store's connection cannot write while the transaction holds the file's write lock, and the
  // transaction rolls back only once the call has failed: a release asked before that would wait
  // out the store's busy timeout, then fail.
  setup s("released-after-rollback", setup::watch_releases);
  int releases = 0;
  int behind_the_lock = 0;
  s.watched.before_release = [&](const idem::identity&) {
    ++releases;
    if (sqlite3_txn_state(s.db.get(), "main") == SQLITE_TXN_WRITE) ++behind_the_lock;
  };
  (void)s.run();
  CHECK(releases == 2);  // one per declined post, each once
  CHECK(behind_the_lock == 0);
}

TEST_CASE("idem::async_begin, async_commit and async_rollback run a SQLite transaction's steps off the coroutine's "
          "thread, around an asynchronous join-transaction call",
          "[sqlite][transaction][async]") {
  setup s("async-steps");
  statement_trace trace(s.db.get());
  const idem::call_options joined{.completion = idem::completion_mode::join_transaction};
  boost::asio::io_context io;
  std::thread::id coroutine_thread;
  bool refused = false;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        coroutine_thread = std::this_thread::get_id();
        for (const long amount : {5L, 7L}) {
          const std::string key = "direct-" + std::to_string(amount);
          auto tx = co_await idem::async_begin<idem::sqlite_transaction>(s.db.get(), boost::asio::use_awaitable);
          CHECK(idem::current_transaction() == nullptr);  // begun unbound
          auto o = co_await idem::async_execute(
              s.engine, s.engine.make_context("Tx.direct", key, joined), *tx,
              [&] {
                idem::sqlite_test::exec(s.db.get(), "INSERT INTO entries VALUES ('" + key + "', " +
                                                        std::to_string(amount) + ")");
                return amount;
              },
              idem::json_codec{}, boost::asio::use_awaitable);
          CHECK(o.ran());
          if (amount == 5) {
            co_await idem::async_commit(*tx, boost::asio::use_awaitable);
          } else {
            co_await idem::async_rollback(*tx, boost::asio::use_awaitable);
          }
        }
        // A BEGIN that fails reaches the coroutine as the exception the constructor threw.
        try {
          (void)co_await idem::async_begin<idem::sqlite_transaction>(static_cast<sqlite3*>(nullptr),
                                                                     boost::asio::use_awaitable);
        } catch (const idem::configuration_error&) {
          refused = true;
        }
      },
      boost::asio::detached);
  io.run();
  CHECK(refused);
  CHECK(idem::sqlite_test::query_int(s.db.get(), "SELECT count(*) FROM entries") == 1);  // 5 committed, 7 rolled back
  const auto completed = [&](const std::string& key) {
    const auto record = s.sqlite.inspect_record(idem::identity("Tx.direct", key), false);
    return record && record->state == idem::record_state::completed;
  };
  CHECK(completed("direct-5"));
  CHECK_FALSE(completed("direct-7"));  // its record rolled back with its row
  for (const auto& [verb, count] : {std::pair{"BEGIN", 2U}, {"COMMIT", 1U}, {"ROLLBACK", 1U}}) {
    INFO(verb);
    const auto threads = trace.threads_of(verb);
    CHECK(threads.size() == count);
    for (const auto thread : threads) CHECK(thread != coroutine_thread);
  }
}
