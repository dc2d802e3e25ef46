// bench/sqlite — the engine over sqlite_store against the very same SQL statements issued raw
// through the sqlite3 API, measured in the same run on files in one temporary directory:
//   first call: SELECT; BEGIN IMMEDIATE; claim upsert; COMMIT; BEGIN IMMEDIATE; UPDATE; COMMIT
//   replay:     SELECT
// both with PRAGMA synchronous = FULL (the store's default) and NORMAL. Then the wake-up latency of
// a duplicate blocked in try_acquire after the holder completes: in the same store (condition
// variable) and in another store object on the same file (the cross-process re-check).
//
// Run: build-sqlite/bench/sqlite/idem_bench_sqlite [operations] [wake-up rounds]
// On a shared machine, run it under `chrt -f 10` (root) so that other processes' load does not
// decide the wake-up tail; docs/bench-sqlite.md has figures both ways.
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <idem/engine.hpp>
#include <idem/sqlite_store.hpp>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

const std::string scope = "OrderConsumer.on";

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "idem_bench_sqlite: %s\n", what);
  std::exit(1);
}

struct temp_dir {
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "idem-bench-sqlite-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) die("cannot create a temporary directory");
    path = pattern;
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::filesystem::path path;
};

std::vector<std::string> make_keys(std::size_t count, const char* prefix) {
  std::vector<std::string> keys;
  keys.reserve(count);
  for (std::size_t i = 0; i < count; ++i) keys.push_back(std::string(prefix) + "-" + std::to_string(i));
  return keys;
}

template <class Op>
double ns_per_op(std::size_t count, Op op) {
  const auto begin = clock_type::now();
  for (std::size_t i = 0; i < count; ++i) op(i);
  return std::chrono::duration<double, std::nano>(clock_type::now() - begin).count() / static_cast<double>(count);
}

// The store's statements, prepared once, on a connection set up as the store sets up its own.
class raw_sql {
 public:
  raw_sql(const std::filesystem::path& path, idem::sqlite_synchronous sync) {
    // Let the store create the table, so both sides run against the identical schema.
    { idem::sqlite_store schema{idem::sqlite_store_options{.path = path, .synchronous = sync}}; }
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
      die("open");
    exec(sync == idem::sqlite_synchronous::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    sqlite3_busy_timeout(db_, 5000);
    select_ = prepare(
        "SELECT state, lease_token, lease_expires_at, expires_at, fingerprint, payload_type, payload_body,"
        " payload_attributes, completed_at FROM idem_records WHERE scope = ?1 AND key_digest = ?2");
    begin_ = prepare("BEGIN IMMEDIATE");
    commit_ = prepare("COMMIT");
    claim_ = prepare(
        "INSERT INTO idem_records (scope, key_digest, state, lease_token, lease_expires_at, expires_at, fingerprint,"
        " created_at) VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (scope, key_digest) DO UPDATE SET state = 1,"
        " lease_token = excluded.lease_token, lease_expires_at = excluded.lease_expires_at, expires_at ="
        " excluded.expires_at, fingerprint = excluded.fingerprint, payload_type = NULL, payload_body = NULL,"
        " payload_attributes = NULL, completed_at = NULL, created_at = excluded.created_at WHERE"
        " (idem_records.state = 2 AND idem_records.expires_at <= ?7) OR (idem_records.state = 1 AND"
        " idem_records.lease_expires_at <= ?7)");
    complete_ = prepare(
        "UPDATE idem_records SET state = 2, payload_type = ?4, payload_body = ?5, payload_attributes = ?6,"
        " completed_at = ?7, expires_at = ?8, lease_token = NULL, lease_expires_at = NULL WHERE scope = ?1 AND"
        " key_digest = ?2 AND state = 1 AND lease_token = ?3");
  }
  ~raw_sql() {
    for (sqlite3_stmt* s : {select_, begin_, commit_, claim_, complete_}) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
  }

  // What the engine does for a first call, minus the engine: look, claim, complete.
  void first_call(const std::string& key) {
    const auto digest = idem::sha256(key);
    const std::int64_t now = now_ms();
    bind_key(select_, digest);
    if (sqlite3_step(select_) != SQLITE_DONE) die("first call found a record");
    reset(select_);
    step_done(begin_);
    bind_key(claim_, digest);
    const std::array<unsigned char, 16> token{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    sqlite3_bind_blob(claim_, 3, token.data(), 16, SQLITE_STATIC);
    sqlite3_bind_int64(claim_, 4, now + 30'000);
    sqlite3_bind_int64(claim_, 5, now + 86'400'000);
    sqlite3_bind_null(claim_, 6);
    sqlite3_bind_int64(claim_, 7, now);
    step_done(claim_);
    if (sqlite3_changes(db_) != 1) die("claim");
    step_done(commit_);
    step_done(begin_);
    bind_key(complete_, digest);
    sqlite3_bind_blob(complete_, 3, token.data(), 16, SQLITE_STATIC);
    sqlite3_bind_text(complete_, 4, "none", 4, SQLITE_STATIC);
    sqlite3_bind_blob(complete_, 5, "", 0, SQLITE_STATIC);
    sqlite3_bind_blob(complete_, 6, "", 0, SQLITE_STATIC);
    sqlite3_bind_int64(complete_, 7, now);
    sqlite3_bind_int64(complete_, 8, now + 86'400'000);
    step_done(complete_);
    step_done(commit_);
  }

  void replay(const std::string& key) {
    const auto digest = idem::sha256(key);
    bind_key(select_, digest);
    if (sqlite3_step(select_) != SQLITE_ROW || sqlite3_column_int64(select_, 0) != 2) die("replay found no record");
    reset(select_);
  }

 private:
  static std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  void exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) die(sql);
  }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) die(sqlite3_errmsg(db_));
    return s;
  }
  void bind_key(sqlite3_stmt* s, const std::array<unsigned char, 32>& digest) {
    sqlite3_bind_text(s, 1, scope.data(), static_cast<int>(scope.size()), SQLITE_STATIC);
    sqlite3_bind_blob(s, 2, digest.data(), 32, SQLITE_TRANSIENT);
  }
  static void reset(sqlite3_stmt* s) {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
  void step_done(sqlite3_stmt* s) {
    if (sqlite3_step(s) != SQLITE_DONE) die(sqlite3_errmsg(db_));
    reset(s);
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* select_ = nullptr;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* claim_ = nullptr;
  sqlite3_stmt* complete_ = nullptr;
};

struct round_result {
  double raw_first, engine_first, raw_replay, engine_replay;
};

round_result run_round(const std::filesystem::path& dir, int round, idem::sqlite_synchronous sync, std::size_t count) {
  round_result r{};
  const std::string tag = std::to_string(round) + (sync == idem::sqlite_synchronous::full ? "-full" : "-normal");
  auto run_raw = [&] {
    const auto keys = make_keys(count, ("raw-" + tag).c_str());
    raw_sql raw(dir / ("raw-" + tag + ".db"), sync);
    r.raw_first = ns_per_op(count, [&](std::size_t i) { raw.first_call(keys[i]); });
    r.raw_replay = ns_per_op(count, [&](std::size_t i) { raw.replay(keys[i]); });
  };
  if (round % 2 == 0) run_raw();  // alternate which side runs first, against warm-up effects
  {
    const auto keys = make_keys(count, ("idem-" + tag).c_str());
    idem::sqlite_store store{idem::sqlite_store_options{.path = dir / ("idem-" + tag + ".db"), .synchronous = sync}};
    idem::engine engine(store);
    r.engine_first = ns_per_op(count, [&](std::size_t i) {
      auto o = engine.execute(engine.make_context(scope, keys[i]), [] {});
      if (!std::holds_alternative<idem::executed<void>>(o)) die("first call did not execute");
    });
    r.engine_replay = ns_per_op(count, [&](std::size_t i) {
      auto o = engine.execute(engine.make_context(scope, keys[i]), [] {});
      if (!std::holds_alternative<idem::replayed<void>>(o)) die("replay did not replay");
    });
  }
  if (round % 2 != 0) run_raw();
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double percentile(const std::vector<double>& sorted, double p) {
  const auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

struct latencies {
  std::vector<double> wake;      // completion committed (complete() returned) -> waiter returned, us
  std::vector<double> complete;  // duration of complete() itself, us
};

// The holder acquires in `holder`; a waiter blocks in `waiter`.try_acquire; after `hold` the holder
// completes. Same store object: woken by the condition variable. Another store object on the same
// file: woken by the re-check, as a waiter in another process would be.
latencies wake_up(idem::sqlite_store& holder, idem::sqlite_store& waiter, int rounds, std::chrono::microseconds hold) {
  latencies out;
  for (int i = 0; i < rounds; ++i) {
    const idem::context ctx{
        .id = idem::identity(
            "Wake.up", "k-" + std::to_string(i) + "-" + std::to_string(clock_type::now().time_since_epoch().count())),
        .wait = 5s};
    const auto token = std::get<idem::acquired>(holder.try_acquire(ctx)).token;
    std::atomic<bool> waiting = false;
    clock_type::time_point returned;
    std::jthread w([&] {
      waiting = true;
      auto r = waiter.try_acquire(ctx);
      returned = clock_type::now();
      if (!std::holds_alternative<idem::duplicate>(r)) die("waiter did not replay");
    });
    while (!waiting) std::this_thread::yield();
    std::this_thread::sleep_for(hold);  // let the waiter block inside the store
    const auto started = clock_type::now();
    holder.complete(ctx.id, token, idem::payload::none(), 1h);
    const auto committed = clock_type::now();
    w.join();
    out.wake.push_back(std::max(0.0, std::chrono::duration<double, std::micro>(returned - committed).count()));
    out.complete.push_back(std::chrono::duration<double, std::micro>(committed - started).count());
  }
  std::sort(out.wake.begin(), out.wake.end());
  std::sort(out.complete.begin(), out.complete.end());
  return out;
}

// The floor set by the machine: a bare std::condition_variable hand-off with the same protocol
// (the waiter blocks, the "holder" flips a flag under the mutex and notifies).
latencies bare_condition_variable(int rounds, std::chrono::microseconds hold) {
  latencies out;
  for (int i = 0; i < rounds; ++i) {
    std::mutex mutex;
    std::condition_variable changed;
    bool done = false;
    std::atomic<bool> waiting = false;
    clock_type::time_point returned;
    std::jthread w([&] {
      std::unique_lock lock(mutex);
      waiting = true;
      changed.wait(lock, [&] { return done; });
      returned = clock_type::now();
    });
    while (!waiting) std::this_thread::yield();
    std::this_thread::sleep_for(hold);
    const auto started = clock_type::now();
    {
      std::lock_guard lock(mutex);
      done = true;
    }
    changed.notify_one();
    const auto committed = clock_type::now();
    w.join();
    out.wake.push_back(std::max(0.0, std::chrono::duration<double, std::micro>(returned - committed).count()));
    out.complete.push_back(std::chrono::duration<double, std::micro>(committed - started).count());
  }
  std::sort(out.wake.begin(), out.wake.end());
  std::sort(out.complete.begin(), out.complete.end());
  return out;
}

void print_latencies(const char* what, const latencies& l) {
  std::printf("  %-44s wake p50 %8.1f us  p99 %8.1f us  max %8.1f us   (complete() p50 %7.1f us)\n", what,
              percentile(l.wake, 0.5), percentile(l.wake, 0.99), l.wake.back(), percentile(l.complete, 0.5));
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t count = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 200;
  temp_dir dir;
  std::printf("idem_bench_sqlite: %zu operations per round, 3 rounds (median), files in %s, SQLite %s\n", count,
              dir.path.c_str(), sqlite3_libversion());

  int round = 0;
  for (const auto sync : {idem::sqlite_synchronous::normal, idem::sqlite_synchronous::full}) {
    std::vector<double> rf, ef, rr, er;
    for (int i = 0; i < 3; ++i) {
      const round_result r =
          run_round(dir.path, round++, sync, sync == idem::sqlite_synchronous::full ? count / 4 : count);
      rf.push_back(r.raw_first);
      ef.push_back(r.engine_first);
      rr.push_back(r.raw_replay);
      er.push_back(r.engine_replay);
    }
    std::printf("synchronous = %s\n", sync == idem::sqlite_synchronous::full ? "FULL" : "NORMAL");
    std::printf("  first call  raw SQL %9.0f ns   engine+sqlite_store %9.0f ns   ratio %.2f\n", median(rf), median(ef),
                median(ef) / median(rf));
    std::printf("  replay      raw SQL %9.0f ns   engine+sqlite_store %9.0f ns   ratio %.2f\n", median(rr), median(er),
                median(er) / median(rr));
  }

  std::printf("wake-up latency, %d rounds, waiter blocked 500 us before the completion:\n", rounds);
  print_latencies("baseline: bare std::condition_variable", bare_condition_variable(rounds, 500us));
  for (const auto sync : {idem::sqlite_synchronous::normal, idem::sqlite_synchronous::full}) {
    const char* name = sync == idem::sqlite_synchronous::full ? "FULL" : "NORMAL";
    const auto path = dir.path / (std::string("wake-") + name + ".db");
    idem::sqlite_store a{idem::sqlite_store_options{.path = path, .synchronous = sync}};
    idem::sqlite_store b{idem::sqlite_store_options{.path = path, .synchronous = sync}};
    const std::string same = std::string("same store (condition variable), ") + name;
    print_latencies(same.c_str(), wake_up(a, a, rounds, 500us));
    const std::string other = std::string("other store object (re-check), ") + name;
    print_latencies(other.c_str(), wake_up(a, b, std::max(1, rounds / 4), 20ms));
  }
  return 0;
}
