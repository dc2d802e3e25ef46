// tests/async/async_sqlite_test.cpp — idem::async_execute on the SQLite store (a real file in a
// temporary directory): looks and claims on the store's two threads, a duplicate's wait a
// registration plus a timer, never a thread parked for the call.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>

#include <idem/asio.hpp>
#include <idem/idem.hpp>
#include <idem/lease_token.hpp>
#include <idem/sqlite_store.hpp>

#include "burst.hpp"
#include "support/eventually.hpp"

namespace {

using namespace std::chrono_literals;
using idem::test::burst;
using idem::test::burst_result;
using idem::test::eventually;

// A database file of its own, removed at the end.
struct temporary_database {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("idem-async-sqlite-" + idem::lease_token::generate().to_string());
  temporary_database() { std::filesystem::create_directories(dir); }
  ~temporary_database() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  std::filesystem::path file() const { return dir / "records.db"; }
};

}  // namespace

TEST_CASE("1,000 coroutines on one thread on SQLite: 500 keys twice at once, each action 50 ms, nothing parked") {
  temporary_database db;
  idem::sqlite_store store(db.file());
  idem::engine engine{store, idem::test::quiet_config()};
  // The store's two threads and its timer thread start on first use: warm them up before counting.
  const burst_result warm = burst(engine, 20, "Burst.warm");
  REQUIRE(warm.executions == 20);
  const burst_result few = burst(engine, 5, "Burst.few");
  const burst_result many = burst(engine, 500, "Burst.many");
  idem::test::check_burst(few, many, store, "on SQLite");
}

TEST_CASE("on SQLite, a duplicate cancelled while it waits ends with operation_cancelled and changes nothing") {
  temporary_database db;
  idem::sqlite_store store(db.file());
  const idem::identity id("Cancel.sqlite", "k");
  idem::context ctx{.id = id, .ttl = 1h, .lease = 30s, .wait = 20s};
  ctx.validate();
  auto held = store.try_acquire(ctx);
  REQUIRE(std::holds_alternative<idem::acquired>(held));
  idem::cancellation cancel;
  std::promise<std::exception_ptr> answered;
  store.async_try_acquire(ctx, &cancel, [&](std::exception_ptr e, idem::acquire_result) { answered.set_value(e); });
  REQUIRE(eventually([&] { return store.waiting() == 1; }, 20s));
  cancel.request();
  auto answer = answered.get_future();
  REQUIRE(answer.wait_for(20s) == std::future_status::ready);
  CHECK_THROWS_AS(std::rethrow_exception(answer.get()), idem::operation_cancelled);
  CHECK(eventually([&] { return store.waiting() == 0; }, 20s));
  // The holder still holds the record: nothing changed.
  store.complete(id, std::get<idem::acquired>(held).token, idem::payload{"text/plain", "done", {}}, 1h);
  auto replay = store.try_acquire(ctx);
  CHECK(std::holds_alternative<idem::duplicate>(replay));
}

TEST_CASE("a SQLite store destroyed with a duplicate waiting answers it store_unavailable_error") {
  temporary_database db;
  idem::test::check_destroyed_with_a_waiter(std::make_unique<idem::sqlite_store>(db.file()), "Destroyed.sqlite");
}
