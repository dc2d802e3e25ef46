// tests/postgres/postgres_required_coroutine_test.cpp — a coroutine method with transaction =
// "required" and join-transaction on the fixture's PostgreSQL: its order row and its record
// commit together in the transaction its wrapper began, or neither does, and the transaction's
// COMMIT does not run on the coroutine's thread.
#include <catch2/catch.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <idem/engine.hpp>
#include <idem/postgres_store.hpp>
#include <idem/postgres_transaction.hpp>

#include "postgres_test_support.hpp"
#include "required_tab.idem.hpp"
#include "support/required_tab_session.hpp"

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
  idem::postgres_transaction_source transactions{db.get()};
  idem::guarded<ledger_test::tab> tab{engine, transactions, [&](const std::string& id, long amount) {
                                        db.query("INSERT INTO " + table + " (id, amount) VALUES ($1, $2::bigint)",
                                                 {id, std::to_string(amount)});
                                      }};

  const std::thread::id coroutine_thread = ledger_test::run_session(
      tab, idem::pg_test::unique_name("kept"), idem::pg_test::unique_name("declined"),
      [&] { return std::stoll(db.scalar("SELECT count(*) FROM " + table)); },
      [&](const std::string& key) {
        const auto record = store.inspect_record(idem::identity("tab.post", key), false);
        return record && record->state == idem::record_state::completed;
      });

  // COMMIT ran on idem's threads, not on the coroutine's (the io_context's only thread).
  const auto committed_on = completions->threads();
  REQUIRE(committed_on.size() == 1);
  CHECK(committed_on.front() != coroutine_thread);
}
