// bench/postgres/postgres_bench.cpp — postgres_store against raw libpq, and wake-up latency.
//
//   idem_bench_postgres [conninfo] [--seconds S] [--rounds R]
//
// conninfo defaults to $IDEM_PG_CONNINFO, else the file $IDEM_PG_DIR/conninfo (as written by
// tests/support/postgres-server.sh). Everything runs in a PostgreSQL schema of its own, dropped at
// the end.
//
// 1. Throughput, 1 and 4 client threads: a first call (claim + complete) and a replay (claim of a
//    complete record), through postgres_store and as the very same prepared statements issued raw
//    through libpq (one blocking connection per thread, no pool, no waiting logic, no decoding
//    beyond what the answer needs). Prints ops/s, the ratio store/raw, the calling threads' CPU
//    time per call (library overhead: unlike wall time, it hardly depends on the machine's load)
//    and the round trips per call the store made (its own counter).
// 2. Wake-up latency of a waiting duplicate after the holder completes: from the start of
//    complete() to the waiter's return, p50/p99, through LISTEN/NOTIFY; baseline: a waiter that
//    polls every 100 ms, as idempotency4j's JDBC store does.
// Not a test: nothing here asserts a threshold.
#include <libpq-fe.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <idem/identity.hpp>
#include <idem/lease_token.hpp>
#include <idem/postgres_store.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "statements.hpp"

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using std::chrono::duration;
using std::chrono::milliseconds;

std::string default_conninfo() {
  if (const char* c = std::getenv("IDEM_PG_CONNINFO"); c != nullptr && *c != '\0') return c;
  if (const char* dir = std::getenv("IDEM_PG_DIR"); dir != nullptr && *dir != '\0') {
    std::ifstream in(std::string(dir) + "/conninfo");
    std::string line;
    if (std::getline(in, line)) return line;
  }
  return {};
}

PGconn* connect_raw(const std::string& conninfo) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) throw std::runtime_error(std::string("cannot connect: ") + PQerrorMessage(conn));
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  return conn;
}

void exec_or_throw(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  const auto status = PQresultStatus(r);
  std::string message = PQresultErrorMessage(r);
  PQclear(r);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) throw std::runtime_error(message + " in: " + sql);
}

std::string be64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((v >> (56 - 8 * i)) & 0xff);
  return s;
}

// The store's claim and complete statements, prepared and sent by hand.
class raw_client {
 public:
  explicit raw_client(const std::string& conninfo) : conn_(connect_raw(conninfo)) {
    using namespace idem::detail::pg;
    for (statement_id id : {statement_id::claim, statement_id::complete}) {
      const statement& s = statement_for(id);
      PGresult* r = PQprepare(conn_, s.name, s.sql, s.param_count, s.types.data());
      const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
      if (!ok) throw std::runtime_error(std::string("prepare failed: ") + PQerrorMessage(conn_));
    }
  }
  ~raw_client() { PQfinish(conn_); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  // Returns the claim's outcome text ("acquired", "duplicate", ...).
  std::string claim(const std::string& scope, const std::string& key, const idem::lease_token& token) {
    const auto digest = idem::sha256(key);
    const std::string d(reinterpret_cast<const char*>(digest.data()), digest.size());
    const std::string t = be64(token.high()) + be64(token.low());
    const std::string lease = be64(30000), ttl = be64(3600000), lock = be64(1);
    const char* values[7] = {scope.data(), d.data(), t.data(), lease.data(), ttl.data(), nullptr, lock.data()};
    const int lengths[7] = {static_cast<int>(scope.size()), 32, 16, 8, 8, 0, 8};
    const int formats[7] = {1, 1, 1, 1, 1, 1, 1};
    PGresult* r = PQexecPrepared(conn_, "idem_claim", 7, values, lengths, formats, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      std::string m = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error("raw claim failed: " + m);
    }
    std::string outcome(PQgetvalue(r, 0, 0), static_cast<std::size_t>(PQgetlength(r, 0, 0)));
    if (outcome == "duplicate") {  // what a replay has to hand back: the payload's bytes
      volatile std::size_t sink =
          static_cast<std::size_t>(PQgetlength(r, 0, 3) + PQgetlength(r, 0, 4) + PQgetlength(r, 0, 5));
      (void)sink;
    }
    PQclear(r);
    return outcome;
  }

  void complete(const std::string& scope, const std::string& key, const idem::lease_token& token,
                const std::string& body) {
    const auto digest = idem::sha256(key);
    const std::string d(reinterpret_cast<const char*>(digest.data()), digest.size());
    const std::string t = be64(token.high()) + be64(token.low());
    const std::string type = "bench/none", attributes, ttl = be64(3600000);
    const std::string note = scope + ':' + idem::to_hex(digest.data(), digest.size());
    const char* values[8] = {scope.data(), d.data(),          t.data(),   type.data(),
                             body.data(),  attributes.data(), ttl.data(), note.data()};
    const int lengths[8] = {static_cast<int>(scope.size()), 32, 16, static_cast<int>(type.size()),
                            static_cast<int>(body.size()),  0,  8,  static_cast<int>(note.size())};
    const int formats[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    PGresult* r = PQexecPrepared(conn_, "idem_complete", 8, values, lengths, formats, 1);
    const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    std::string m = PQresultErrorMessage(r);
    PQclear(r);
    if (!ok) throw std::runtime_error("raw complete failed: " + m);
  }

 private:
  PGconn* conn_;
};

idem::payload bench_payload() {
  idem::payload p;
  p.type = "bench/none";
  p.body = "{\"order\":42,\"status\":\"accepted\"}";
  return p;
}

idem::context context_for(const std::string& scope, const std::string& key, milliseconds wait) {
  idem::context ctx{.id = idem::identity(scope, key), .ttl = 1h, .lease = 30s, .wait = wait};
  ctx.validate();
  return ctx;
}

// One measurement: calls per second (wall clock) and the calling threads' CPU time per call.
struct rate {
  double per_second = 0;
  double cpu_us_per_call = 0;
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Runs `op(thread, i)` on `threads` threads for about `seconds`.
template <class Op>
rate run_for(int threads, double seconds, Op op) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::mutex mutex;
  double cpu = 0;
  std::exception_ptr failure;
  std::vector<std::thread> pool;
  const auto start = steady::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const double cpu0 = thread_cpu_seconds();
      std::uint64_t n = 0;
      try {
        while (!stop.load(std::memory_order_relaxed)) op(t, n++);
      } catch (...) {
        std::lock_guard lock{mutex};
        if (!failure) failure = std::current_exception();
        stop = true;
      }
      total += n;
      std::lock_guard lock{mutex};
      cpu += thread_cpu_seconds() - cpu0;
    });
  }
  const auto end = start + std::chrono::duration_cast<steady::duration>(duration<double>(seconds));
  while (!stop.load() && steady::now() < end) std::this_thread::sleep_for(10ms);
  stop = true;
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);
  const double elapsed = duration<double>(steady::now() - start).count();
  const auto calls = static_cast<double>(std::max<std::uint64_t>(total.load(), 1));
  return {calls / elapsed, cpu * 1e6 / calls};
}

// Measures `store_op` and `raw_op` alternately, `rounds` times each for `seconds` / `rounds`, and
// keeps the best of each side (highest rate, lowest CPU per call): on a shared machine, load from
// elsewhere then hits both sides alike instead of whichever ran second.
template <class StoreOp, class RawOp>
std::pair<rate, rate> compare(int threads, double seconds, int rounds, StoreOp store_op, RawOp raw_op) {
  rate best_store{0, 1e18}, best_raw{0, 1e18};
  for (int r = 0; r < rounds; ++r) {
    const rate raw = run_for(threads, seconds / rounds, raw_op);
    const rate store = run_for(threads, seconds / rounds, store_op);
    best_raw = {std::max(best_raw.per_second, raw.per_second), std::min(best_raw.cpu_us_per_call, raw.cpu_us_per_call)};
    best_store = {std::max(best_store.per_second, store.per_second),
                  std::min(best_store.cpu_us_per_call, store.cpu_us_per_call)};
  }
  return {best_store, best_raw};
}

void print_row(const char* what, int threads, const rate& store, const rate& raw, double trips) {
  std::printf("%-28s %7d %12.0f %12.0f %6.2f %14.1f %14.1f %10.2f\n", what, threads, store.per_second, raw.per_second,
              store.per_second / raw.per_second, store.cpu_us_per_call, raw.cpu_us_per_call, trips);
}

std::string unique(const std::string& hint, int thread, std::uint64_t i, int run) {
  return hint + "-" + std::to_string(run) + "-" + std::to_string(thread) + "-" + std::to_string(i);
}

struct percentiles {
  double p50, p99, max;
};

percentiles summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<std::size_t>(q * static_cast<double>(ms.size())))];
  };
  return {at(0.50), at(0.99), ms.back()};
}

// From the start of complete() to the return of a duplicate waiting for it, in ms, `iterations`
// times. `polling`: the waiter looks every 100 ms instead of waiting inside try_acquire.
percentiles wake_latency(idem::postgres_store& store, int iterations, bool polling) {
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    const auto ctx = context_for("Bench.wake",
                                 unique(polling ? "poll" : "notify", 0, static_cast<std::uint64_t>(i),
                                        static_cast<int>(steady::now().time_since_epoch().count() % 100000)),
                                 10s);
    const auto token = std::get<idem::acquired>(store.try_acquire(ctx)).token;
    std::promise<steady::time_point> woke;
    auto woke_at = woke.get_future();
    std::thread waiter([&] {
      if (polling) {
        idem::context look = ctx;
        look.wait = 0ms;
        while (!std::holds_alternative<idem::duplicate>(store.try_acquire(look))) std::this_thread::sleep_for(100ms);
        woke.set_value(steady::now());
      } else if (std::holds_alternative<idem::duplicate>(store.try_acquire(ctx))) {
        woke.set_value(steady::now());
      } else {
        woke.set_exception(
            std::make_exception_ptr(std::runtime_error("the waiter was not answered with the duplicate")));
      }
    });
    // Let the waiter reach its wait (a poller: land anywhere in its 100 ms period).
    std::this_thread::sleep_for(polling ? milliseconds(20 + (i * 37) % 100) : 20ms);
    const auto t0 = steady::now();
    store.complete(ctx.id, token, bench_payload(), 1h);
    waiter.join();
    ms.push_back(duration<double, std::milli>(woke_at.get() - t0).count());
  }
  return summarize(std::move(ms));
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string conninfo = default_conninfo();
  double seconds = 3.0;
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      conninfo = a;
    }
  }
  if (conninfo.empty()) {
    std::fprintf(
        stderr,
        "usage: %s [conninfo] [--seconds S] [--rounds R]\n  (or set IDEM_PG_CONNINFO, or IDEM_PG_DIR as written by "
        "tests/support/postgres-server.sh start <dir>)\n",
        argv[0]);
    return 2;
  }

  const std::string schema = "idem_bench_" + idem::lease_token::generate().to_string().substr(0, 8);
  PGconn* admin = connect_raw(conninfo);
  exec_or_throw(admin, "CREATE SCHEMA " + schema);
  const std::string info = conninfo + " options='-csearch_path=" + schema + "'";
  int status = 0;
  try {
    idem::postgres_store_options o{.conninfo = info, .pool_size = 4};
    idem::postgres_store store{o};
    store.create_schema();
    PGresult* version = PQexec(admin, "SHOW server_version");
    std::printf(
        "idem postgres benchmark: PostgreSQL %s, %.1f s per measurement in %d alternating rounds (best "
        "round kept), %u hardware threads\n",
        PQgetvalue(version, 0, 0), seconds, rounds, std::thread::hardware_concurrency());
    PQclear(version);

    std::printf("\n%-28s %7s %12s %12s %6s %14s %14s %10s\n", "operation", "threads", "store ops/s", "raw ops/s",
                "ratio", "store cpu us", "raw cpu us", "trips/op");
    int run = 0;
    for (int threads : {1, 4}) {
      ++run;
      std::vector<std::unique_ptr<raw_client>> raw;
      for (int t = 0; t < threads; ++t) raw.push_back(std::make_unique<raw_client>(info));
      const idem::payload value = bench_payload();

      // First call: claim + complete, each on a key never used before.
      std::atomic<std::uint64_t> sequence{0};
      const auto trips0 = store.statistics().round_trips;
      std::atomic<std::uint64_t> store_ops{0};
      const auto [store_first, raw_first] = compare(
          threads, seconds, rounds,
          [&](int, std::uint64_t) {
            const auto ctx = context_for("Bench.first", unique("s", 0, sequence++, run), 0ms);
            const auto r = store.try_acquire(ctx);
            if (!std::holds_alternative<idem::acquired>(r)) throw std::runtime_error("a fresh key was not acquired");
            store.complete(ctx.id, std::get<idem::acquired>(r).token, value, 1h);
            ++store_ops;
          },
          [&](int t, std::uint64_t) {
            const std::string key = unique("r", 0, sequence++, run);
            const auto token = idem::lease_token::generate();
            if (raw[static_cast<std::size_t>(t)]->claim("Bench.first", key, token) != "acquired")
              throw std::runtime_error("raw claim did not acquire");
            raw[static_cast<std::size_t>(t)]->complete("Bench.first", key, token, value.body);
          });
      const double trips_first =
          static_cast<double>(store.statistics().round_trips - trips0) / static_cast<double>(store_ops.load());
      print_row("first call (claim+complete)", threads, store_first, raw_first, trips_first);

      // Replay: claim of a complete record, over a set of keys completed beforehand.
      constexpr std::uint64_t keys = 1000;
      for (std::uint64_t i = 0; i < keys; ++i) {
        const auto ctx = context_for("Bench.replay", unique("k", 0, i, run), 0ms);
        if (auto r = store.try_acquire(ctx); std::holds_alternative<idem::acquired>(r))
          store.complete(ctx.id, std::get<idem::acquired>(r).token, value, 1h);
      }
      const auto trips1 = store.statistics().round_trips;
      store_ops = 0;
      const auto [store_replay, raw_replay] = compare(
          threads, seconds, rounds,
          [&](int t, std::uint64_t i) {
            const auto key = unique("k", 0, (i * 7 + static_cast<std::uint64_t>(t)) % keys, run);
            const auto r = store.try_acquire(context_for("Bench.replay", key, 0ms));
            if (!std::holds_alternative<idem::duplicate>(r)) throw std::runtime_error("expected a duplicate");
            ++store_ops;
          },
          [&](int t, std::uint64_t i) {
            const std::string key = unique("k", 0, (i * 7 + static_cast<std::uint64_t>(t)) % keys, run);
            if (raw[static_cast<std::size_t>(t)]->claim("Bench.replay", key, idem::lease_token::generate()) !=
                "duplicate")
              throw std::runtime_error("raw claim did not replay");
          });
      const double trips_replay =
          static_cast<double>(store.statistics().round_trips - trips1) / static_cast<double>(store_ops.load());
      print_row("replay (claim)", threads, store_replay, raw_replay, trips_replay);
    }

    // Wake-up latency.
    std::printf("\n%-44s %10s %10s %10s %10s\n", "wake-up of a waiting duplicate", "samples", "p50 ms", "p99 ms",
                "max ms");
    const auto notified = wake_latency(store, 200, false);
    std::printf("%-44s %10d %10.2f %10.2f %10.2f\n", "LISTEN/NOTIFY (postgres_store)", 200, notified.p50, notified.p99,
                notified.max);
    const auto polled = wake_latency(store, 40, true);
    std::printf("%-44s %10d %10.2f %10.2f %10.2f\n", "baseline: poll every 100 ms", 40, polled.p50, polled.p99,
                polled.max);
    status = 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchmark failed: %s\n", e.what());
    status = 1;
  }
  try {
    exec_or_throw(admin, "DROP SCHEMA " + schema + " CASCADE");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "could not drop schema %s: %s\n", schema.c_str(), e.what());
  }
  PQfinish(admin);
  return status;
}
