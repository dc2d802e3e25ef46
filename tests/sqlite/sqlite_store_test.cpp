// tests/sqlite/sqlite_store_test.cpp — what the SQLite store does beyond the store contract:
// several processes and store objects on one file, durability across reopening, what the file
// holds, bounded answers under another writer's lock, and clear errors for unusable paths.
#include <poll.h>
#include <sqlite3.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <idem/errors.hpp>
#include <idem/sqlite_store.hpp>
#include <idem/sqlite_transaction.hpp>
#include <optional>
#include <string>
#include <variant>

#include <idem/testing/store_contract.hpp>
#include "sqlite_test_support.hpp"

namespace {

using namespace std::chrono_literals;
using idem::contract::background;
using idem::contract::fresh_identity;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::require_in_flight;
using idem::contract::sample_payload;
using idem::contract::stopwatch;
using idem::sqlite_test::fresh_db_path;
using idem::sqlite_test::open_connection;
using idem::sqlite_test::options_for;
using std::chrono::milliseconds;

idem::context context_for(const idem::identity& id, milliseconds wait = 5s, milliseconds lease = 30s) {
  idem::context ctx{.id = id, .ttl = 1h, .lease = lease, .wait = wait};
  ctx.validate();
  return ctx;
}

std::string read_file(const std::filesystem::path& path) {
  std::string bytes(static_cast<std::size_t>(std::filesystem::file_size(path)), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  return bytes;
}

// What a forked child reports through its exit status.
enum child_status : int { child_acquired = 10, child_duplicate = 11, child_other = 12, child_threw = 13 };

// Runs in a forked child: opens its own store on `path` and claims `id`; if it acquires, completes
// with body "child". Never returns.
[[noreturn]] void run_child(const std::filesystem::path& path, const idem::identity& id, int go_fd) {
  int code = child_threw;
  try {
    idem::sqlite_store store{options_for(path)};
    char go = 0;
    if (::read(go_fd, &go, 1) != 1) ::_exit(child_other);
    const idem::acquire_result r = store.try_acquire(context_for(id, 10s));
    if (const auto* a = std::get_if<idem::acquired>(&r)) {
      store.complete(id, a->token, sample_payload("child"), 1h);
      code = child_acquired;
    } else if (const auto* d = std::get_if<idem::duplicate>(&r)) {
      code = d->value == sample_payload("parent") ? child_duplicate : child_other;
    } else {
      code = child_other;
    }
  } catch (...) {
    code = child_threw;
  }
  ::_exit(code);
}

}  // namespace

TEST_CASE("two processes on one file: exactly one acquires, the other replays after the completion",
          "[sqlite][process]") {
  const auto path = fresh_db_path("processes");
  idem::sqlite_store store{options_for(path)};  // creates the schema before the fork
  const auto id = fresh_identity("two-processes");

  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(go[1]);
    run_child(path, id, go[0]);
  }
  ::close(go[0]);
  REQUIRE(::write(go[1], "g", 1) == 1);  // both race for the key from here on
  ::close(go[1]);

  const stopwatch watch;
  const idem::acquire_result mine = store.try_acquire(context_for(id, 10s));
  bool parent_acquired = false;
  if (const auto* a = std::get_if<idem::acquired>(&mine)) {
    parent_acquired = true;
    store.complete(id, a->token, sample_payload("parent"), 1h);
  } else {
    // The child won; this process waited for it in another process: only the re-check sees it.
    CHECK(require_duplicate(mine).value == sample_payload("child"));
  }

  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  const int code = WEXITSTATUS(status);
  INFO("parent " << (parent_acquired ? "acquired" : "replayed") << ", child exit code " << code << ", after "
                 << watch.elapsed().count() << " ms");
  if (parent_acquired) {
    CHECK(code == child_duplicate);
  } else {
    CHECK(code == child_acquired);
  }
}

TEST_CASE("a process waiting on a record held in another process is woken by the re-check", "[sqlite][process]") {
  const auto path = fresh_db_path("process-wait");
  idem::sqlite_store store{options_for(path)};
  const auto id = fresh_identity("process-wait");
  const auto token = require_acquired(store.try_acquire(context_for(id)));

  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(go[1]);
    run_child(path, id, go[0]);
  }
  ::close(go[0]);
  REQUIRE(::write(go[1], "g", 1) == 1);
  ::close(go[1]);

  // The child cannot finish while the record is held: its pidfd stays silent for 200 ms.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  REQUIRE(pidfd >= 0);
  pollfd exited{.fd = pidfd, .events = POLLIN, .revents = 0};
  CHECK(::poll(&exited, 1, 200) == 0);
  ::close(pidfd);
  int status = 0;
  store.complete(id, token, sample_payload("parent"), 1h);
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == child_duplicate);
}

TEST_CASE("two store objects on one file: a waiter in one sees the completion in the other", "[sqlite]") {
  const auto path = fresh_db_path("two-stores");
  idem::sqlite_store holder{options_for(path)};
  idem::sqlite_store waiter{options_for(path)};
  const auto id = fresh_identity("two-stores");
  const auto token = require_acquired(holder.try_acquire(context_for(id)));

  background<idem::acquire_result> other([&] { return waiter.try_acquire(context_for(id, 10s)); });
  REQUIRE_FALSE(other.finished_within(150ms));  // blocked: the record is held
  holder.complete(id, token, sample_payload(), 1h);
  REQUIRE(other.finished_within(5s));
  CHECK(require_duplicate(other.result()).value == sample_payload());
}

TEST_CASE("two store objects on one file: exactly one of them acquires", "[sqlite][concurrency]") {
  const auto path = fresh_db_path("two-stores-race");
  idem::sqlite_store a{options_for(path)};
  idem::sqlite_store b{options_for(path)};
  for (int round = 0; round < 10; ++round) {
    const auto id = fresh_identity("race");
    background<idem::acquire_result> first([&] { return a.try_acquire(context_for(id, 0ms)); });
    background<idem::acquire_result> second([&] { return b.try_acquire(context_for(id, 0ms)); });
    REQUIRE(first.finished_within(5s));
    REQUIRE(second.finished_within(5s));
    const auto r1 = first.result();
    const auto r2 = second.result();
    INFO("round " << round << ": " << idem::contract::describe(r1) << " / " << idem::contract::describe(r2));
    CHECK(std::holds_alternative<idem::acquired>(r1) + std::holds_alternative<idem::acquired>(r2) == 1);
  }
}

TEST_CASE("completed records survive closing and reopening the file", "[sqlite]") {
  const auto path = fresh_db_path("durable");
  const auto id = fresh_identity("durable");
  const auto held_id = fresh_identity("durable-held");
  {
    idem::sqlite_store store{options_for(path)};
    const auto token = require_acquired(store.try_acquire(context_for(id)));
    store.complete(id, token, sample_payload("kept"), 1h);
    require_acquired(store.try_acquire(context_for(held_id)));
  }
  idem::sqlite_store reopened{options_for(path)};
  CHECK(require_duplicate(reopened.try_acquire(context_for(id, 0ms))).value == sample_payload("kept"));
  CHECK(require_in_flight(reopened.try_acquire(context_for(held_id, 0ms))).retry_after > 20s);
}

TEST_CASE("the file holds the scope and the key's SHA-256, never the raw key", "[sqlite]") {
  const auto path = fresh_db_path("no-raw-key");
  const idem::identity id("Secrets.store", "raw-key-" + idem::contract::unique_key("never-on-disk"));
  {
    idem::sqlite_store store{options_for(path)};
    const auto token = require_acquired(store.try_acquire(context_for(id)));
    store.complete(id, token, sample_payload(), 1h);

    auto db = open_connection(path);
    CHECK(idem::sqlite_test::query_int(db.get(),
                                       "SELECT count(*) FROM idem_records WHERE scope = 'Secrets.store' "
                                       "AND length(key_digest) = 32") == 1);
    CHECK(idem::sqlite_test::query_int(db.get(),
                                       "SELECT count(*) FROM idem_records WHERE instr(CAST(scope AS BLOB) "
                                       "|| key_digest, CAST('raw-key-' AS BLOB)) > 0") == 0);
  }
  // Every byte SQLite left on disk: the database and any WAL or shared-memory file.
  std::string everything;
  for (const auto& entry : std::filesystem::directory_iterator(path.parent_path()))
    if (entry.path().filename().string().rfind(path.filename().string(), 0) == 0) everything += read_file(entry.path());
  REQUIRE_FALSE(everything.empty());
  const auto digest = id.key_digest();
  CHECK(everything.find(std::string(reinterpret_cast<const char*>(digest.data()), digest.size())) != std::string::npos);
  CHECK(everything.find(id.key()) == std::string::npos);
}

TEST_CASE("opening an existing file again keeps its schema and is idempotent", "[sqlite]") {
  const auto path = fresh_db_path("schema");
  idem::sqlite_store first{options_for(path)};
  idem::sqlite_store second{options_for(path)};
  idem::sqlite_store third{options_for(path)};
  auto db = open_connection(path);
  CHECK(idem::sqlite_test::query_int(db.get(), "SELECT count(*) FROM sqlite_master WHERE name = 'idem_records'") == 1);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db.get(), "PRAGMA journal_mode", -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))) == "wal");
  sqlite3_finalize(stmt);
}

TEST_CASE("a custom table name keeps records apart", "[sqlite]") {
  const auto path = fresh_db_path("tables");
  auto options = options_for(path);
  options.table = "other_records";
  idem::sqlite_store custom{options};
  idem::sqlite_store standard{options_for(path)};
  const auto id = fresh_identity("tables");
  require_acquired(custom.try_acquire(context_for(id)));
  require_acquired(standard.try_acquire(context_for(id)));
}

TEST_CASE("unusable paths and options fail at construction with a clear error", "[sqlite]") {
  SECTION("a file in a directory that does not exist") {
    const auto path = idem::sqlite_test::temp_dir() / "missing-directory" / "idem.db";
    try {
      idem::sqlite_store store{options_for(path)};
      FAIL("constructed");
    } catch (const idem::store_unavailable_error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
      CHECK(std::string(e.what()).find("unable to open") != std::string::npos);
    }
  }
  SECTION("a directory") {
    try {
      idem::sqlite_store store{options_for(idem::sqlite_test::temp_dir())};
      FAIL("constructed");
    } catch (const idem::store_unavailable_error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(idem::sqlite_test::temp_dir().string()) != std::string::npos);
    }
  }
  SECTION("a file that is not a database") {
    const auto path = fresh_db_path("garbage");
    std::ofstream(path, std::ios::binary) << std::string(8192, 'x');
    try {
      idem::sqlite_store store{options_for(path)};
      FAIL("constructed");
    } catch (const idem::store_unavailable_error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
      CHECK(std::string(e.what()).find("not a database") != std::string::npos);
    }
  }
  SECTION("a table of the same name with another shape") {
    const auto path = fresh_db_path("foreign-table");
    {
      auto db = open_connection(path);
      idem::sqlite_test::exec(db.get(), "CREATE TABLE idem_records (id INTEGER PRIMARY KEY, note TEXT)");
    }
    try {
      idem::sqlite_store store{options_for(path)};
      FAIL("constructed");
    } catch (const idem::store_unavailable_error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("idem_records") != std::string::npos);
    }
  }
  SECTION("options") {
    CHECK_THROWS_AS(idem::sqlite_store(options_for("")), idem::configuration_error);
    CHECK_THROWS_AS(idem::sqlite_store(options_for(":memory:")), idem::configuration_error);
    auto options = options_for(fresh_db_path("options"));
    options.table = "bad name; DROP TABLE x";
    CHECK_THROWS_AS(idem::sqlite_store(options), idem::configuration_error);
    options = options_for(fresh_db_path("options"));
    options.connections = 0;
    CHECK_THROWS_AS(idem::sqlite_store(options), idem::configuration_error);
    options = options_for(fresh_db_path("options"));
    options.recheck_initial = 0ms;
    CHECK_THROWS_AS(idem::sqlite_store(options), idem::configuration_error);
  }
}

TEST_CASE("a claim blocked by another connection's write lock answers in flight within its wait", "[sqlite]") {
  const auto path = fresh_db_path("locked");
  auto options = options_for(path);
  options.min_claim_lock_wait = 0ms;
  options.busy_timeout = 200ms;
  idem::sqlite_store store{options};
  const auto id = fresh_identity("locked");
  const auto held_id = fresh_identity("locked-held");
  const auto token = require_acquired(store.try_acquire(context_for(held_id)));

  auto other = open_connection(path);
  idem::sqlite_test::exec(other.get(), "BEGIN IMMEDIATE");  // another process's writer, say

  const stopwatch watch;
  CHECK(require_in_flight(store.try_acquire(context_for(id, 300ms))).retry_after == 0ms);
  const auto elapsed = watch.elapsed();
  CHECK(elapsed >= 250ms);
  CHECK(elapsed < 3s);

  // Replays and held records are still answered: reading needs no lock.
  CHECK(require_in_flight(store.try_acquire(context_for(held_id, 0ms))).retry_after > 20s);

  // A completion waits at most busy_timeout, then reports the lock.
  const stopwatch completing;
  CHECK_THROWS_AS(store.complete(held_id, token, sample_payload(), 1h), idem::store_unavailable_error);
  CHECK(completing.elapsed() < 3s);

  idem::sqlite_test::exec(other.get(), "ROLLBACK");
  store.complete(held_id, token, sample_payload(), 1h);
  require_acquired(store.try_acquire(context_for(id, 0ms)));
}

TEST_CASE("a record idem cannot read is reported as corrupt without the raw key", "[sqlite]") {
  const auto path = fresh_db_path("corrupt");
  idem::sqlite_store store{options_for(path)};
  const auto id = fresh_identity("corrupt");
  const auto token = require_acquired(store.try_acquire(context_for(id)));
  store.complete(id, token, sample_payload(), 1h);
  auto db = open_connection(path);
  idem::sqlite_test::exec(db.get(), "UPDATE idem_records SET payload_attributes = x'01020304'");
  try {
    store.try_acquire(context_for(id, 0ms));
    FAIL("no exception");
  } catch (const idem::corrupt_record_error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(id.to_string()) != std::string::npos);
    CHECK(std::string(e.what()).find(id.key()) == std::string::npos);
  }
}

// Found by tests/fuzz (sqlite_record): a completed_at that std::chrono::system_clock cannot hold
// overflowed converting it to the replay's time_point (UBSan: signed overflow).
TEST_CASE("a completion time out of the clock's range is corrupt, not an overflow", "[sqlite]") {
  const auto path = fresh_db_path("completed-at");
  idem::sqlite_store store{options_for(path)};
  const auto id = fresh_identity("completed-at");
  const auto token = require_acquired(store.try_acquire(context_for(id)));
  store.complete(id, token, sample_payload(), 1h);
  auto db = open_connection(path);
  for (const char* value : {"9223372036854775807", "-9223372036854775808", "-1"}) {
    INFO(value);
    idem::sqlite_test::exec(db.get(), std::string("UPDATE idem_records SET completed_at = ") + value);
    CHECK_THROWS_AS(store.try_acquire(context_for(id, 0ms)), idem::corrupt_record_error);
  }
}

TEST_CASE("many threads on a small pool share its connections", "[sqlite][concurrency]") {
  auto options = options_for(fresh_db_path("pool"));
  options.connections = 2;
  idem::sqlite_store store{options};
  std::vector<idem::identity> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(fresh_identity("pool"));
  std::vector<std::unique_ptr<background<int>>> workers;
  for (int t = 0; t < 8; ++t) {
    workers.push_back(std::make_unique<background<int>>([&] {
      int acquired = 0;
      for (const auto& id : ids) {
        auto r = store.try_acquire(context_for(id, 5s));
        if (auto* a = std::get_if<idem::acquired>(&r)) {
          ++acquired;
          store.complete(id, a->token, sample_payload(), 1h);
        }
      }
      return acquired;
    }));
  }
  int total = 0;
  for (auto& w : workers) {
    REQUIRE(w->finished_within(30s));
    total += w->result();
  }
  CHECK(total == 8);
}

TEST_CASE("opening a store whose schema exists writes nothing, so it opens while another writer holds the lock",
          "[sqlite]") {
  const auto path = fresh_db_path("open-locked");
  auto options = options_for(path);
  options.busy_timeout = 200ms;
  const auto id = fresh_identity("open-locked");
  {
    idem::sqlite_store first{options};  // creates the schema
    const auto token = require_acquired(first.try_acquire(context_for(id)));
    first.complete(id, token, sample_payload(), 1h);
  }
  auto other = open_connection(path);
  idem::sqlite_test::exec(other.get(), "BEGIN IMMEDIATE");  // another process's long write transaction
  std::optional<idem::sqlite_store> second;
  CHECK_NOTHROW(second.emplace(options));  // used to fail after busy_timeout: "cannot create the table"
  REQUIRE(second);
  CHECK(require_duplicate(second->try_acquire(context_for(id, 0ms))).value == sample_payload());  // reads need no lock
  idem::sqlite_test::exec(other.get(), "ROLLBACK");
}
