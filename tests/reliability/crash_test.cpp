// tests/reliability/crash_test.cpp — crash and paused-holder tests (ctest label `crash`).
//
// A supervisor forks idem_crash_worker processes over one shared set of keys on a real store
// (a SQLite file, the fixture's PostgreSQL, the fixture's redis-server), SIGKILLs them at random
// points, restarts them, and lets every worker run until it saw every key done. Then it checks the
// workers' logs, the effects in the database and the records (see docs/reliability.md).
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#include <idem/engine.hpp>
#include <idem/postgres_store.hpp>

#include "process.hpp"
#include "reliability_support.hpp"

namespace fs = std::filesystem;
using namespace std::chrono;
using idem::reliability::child;
using idem::reliability::target;

namespace {

constexpr milliseconds lease{300};

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

// The state directory of a ctest fixture's server; the test fails if the fixture did not start it.
std::string fixture_dir(const char* dir) {
  if (!fs::exists(dir)) FAIL("no server state in " << dir << ": run through ctest, whose fixture starts the server");
  return dir;
}

// A temporary directory of this test, removed at the end.
struct scratch {
  fs::path dir;
  scratch() {
    std::string templ = (fs::temp_directory_path() / "idem-crash.XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir = templ;
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// The database of one run: a fresh SQLite file, PostgreSQL schema or Redis prefix.
struct run_database {
  scratch tmp;
  target where;
  std::string pg_base;
  std::string pg_schema;

  run_database(const std::string& kind, const std::string& name) {
    where.kind = kind;
    const std::string unique = name + "_" + std::to_string(::getpid());
    if (kind == "sqlite") {
      where.where = (tmp.dir / "idem.db").string();
      idem::reliability::open_store(where);  // creates the file and the records table
    } else if (kind == "postgres") {
      pg_base = first_line(fs::path(fixture_dir(IDEM_PG_FIXTURE_DIR)) / "conninfo");
      pg_schema = "crash_" + unique;
      admin("DROP SCHEMA IF EXISTS " + pg_schema + " CASCADE; CREATE SCHEMA " + pg_schema);
      where.where = pg_base + " options='-csearch_path=" + pg_schema + "'";
      idem::postgres_store store{{.conninfo = where.where, .log = nullptr}};
      store.create_schema();
    } else if (kind == "redis_cluster") {
      std::ifstream seeds(fs::path(fixture_dir(IDEM_REDIS_CLUSTER_FIXTURE_DIR)) / "seeds");
      std::string nodes;
      for (std::string line; std::getline(seeds, line);) {
        if (!line.empty()) nodes += (nodes.empty() ? "" : ",") + line;
      }
      if (nodes.empty()) throw std::runtime_error("the redis_cluster fixture wrote no seeds");
      where.where = nodes + "/crash:" + unique + ":";
    } else {
      where.where = first_line(fs::path(fixture_dir(IDEM_REDIS_FIXTURE_DIR)) / "address") + "/crash:" + unique + ":";
    }
    idem::reliability::effects fx{where};
    fx.create();
  }
  ~run_database() {
    if (!pg_schema.empty()) {
      try {
        admin("DROP SCHEMA IF EXISTS " + pg_schema + " CASCADE");
      } catch (...) {
      }
    }
  }
  void admin(const std::string& sql) const {
    PGconn* c = PQconnectdb(pg_base.c_str());
    PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);
    PGresult* r = PQexec(c, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    std::string message = PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(c);
    if (!ok) throw std::runtime_error("postgres admin: " + message);
  }
};

// One worker incarnation's log.
struct worker_log {
  std::set<int> acquired, effected, completed;
  std::vector<std::pair<int, std::string>> replays;
  std::vector<std::string> errors, failures, other;
  bool done = false;
};

worker_log read_log(const fs::path& p) {
  worker_log w;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string tag;
    int k = -1;
    s >> tag;
    if (tag == "D") {
      w.done = true;
      continue;
    }
    if (tag == "L" || tag == "Z") {
      w.other.push_back(line);
      continue;
    }
    s >> k;
    if (tag == "A") w.acquired.insert(k);
    else if (tag == "E") w.effected.insert(k);
    else if (tag == "C") w.completed.insert(k);
    else if (tag == "R") {
      std::string v;
      s >> v;
      w.replays.emplace_back(k, v);
    } else if (tag == "X") {
      std::string rest;
      std::getline(s, rest);
      w.errors.push_back(rest);
    } else if (tag == "F") {
      std::string rest;
      std::getline(s, rest);
      w.failures.push_back(rest);
    }
  }
  return w;
}

std::vector<std::string> worker_argv(const target& t, const std::string& mode, int incarnation, int keys,
                                     const fs::path& log) {
  return {IDEM_CRASH_WORKER, t.kind,      t.where, mode, std::to_string(incarnation), std::to_string(keys),
          log.string(),      std::to_string(lease.count())};
}

int incarnation_of(const std::string& value) { return std::stoi(value.substr(3)); }

// The crash scenario for one store and completion mode.
void crash_run(const std::string& kind, const std::string& mode) {
  constexpr int keys = 200;
  constexpr int workers = 3;
  constexpr int max_kills = 30;
  run_database db(kind, "crash_" + mode);
  const fs::path logs = db.tmp.dir;
  auto log_of = [&](int inc) { return logs / ("worker-" + std::to_string(inc) + ".log"); };

  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pause_ms(30, 250);
  std::vector<std::unique_ptr<child>> slots(workers);
  std::vector<int> slot_inc(workers);
  std::set<int> killed;
  int next_inc = 1;
  auto start = [&](int slot) {
    slot_inc[slot] = next_inc++;
    slots[slot] = std::make_unique<child>(worker_argv(db.where, mode, slot_inc[slot], keys, log_of(slot_inc[slot])));
  };
  for (int s = 0; s < workers; ++s) start(s);

  const auto begun = steady_clock::now();
  const auto deadline = begun + seconds(90);
  int kills = 0;
  std::vector<bool> finished(workers, false);
  while (std::count(finished.begin(), finished.end(), true) < workers) {
    REQUIRE(steady_clock::now() < deadline);  // a hang, not a slow run
    // Wait for a worker to exit, or until the next kill is due.
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int s = 0; s < workers; ++s)
      if (!finished[s]) {
        fds.push_back({slots[s]->pidfd(), POLLIN, 0});
        which.push_back(s);
      }
    const int timeout = kills < max_kills ? pause_ms(rng) : 1000;
    const int ready = ::poll(fds.data(), fds.size(), timeout);
    if (ready > 0) {
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if ((fds[i].revents & POLLIN) == 0) continue;
        const int s = which[i];
        slots[s]->reap();
        if (!slots[s]->exited_cleanly()) {
          const auto w = read_log(log_of(slot_inc[s]));
          FAIL("worker " << slot_inc[s] << " failed, status " << slots[s]->status() << ": "
                         << (w.other.empty() ? std::string("no message") : w.other.back()));
        }
        finished[s] = true;
      }
      continue;
    }
    if (kills >= max_kills) continue;
    // SIGKILL a random live worker and start its replacement.
    std::vector<int> live;
    for (int s = 0; s < workers; ++s)
      if (!finished[s]) live.push_back(s);
    const int s = live[std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng)];
    slots[s]->signal(SIGKILL);
    slots[s]->reap();
    if (slots[s]->exited_cleanly()) {
      finished[s] = true;  // it finished just before the kill
      continue;
    }
    killed.insert(slot_inc[s]);
    ++kills;
    start(s);
  }
  const double run_seconds = duration<double>(steady_clock::now() - begun).count();

  // The logs of every incarnation.
  std::map<int, worker_log> log;
  for (int inc = 1; inc < next_inc; ++inc) log[inc] = read_log(log_of(inc));

  // Every record, once every lease of a killed holder has expired: each key must replay
  // (a key still in progress would answer in flight, a lost record would run the action).
  std::this_thread::sleep_for(lease);  // a lease is a duration, not an event: let the last one lapse
  std::map<int, int> completed_by;
  {
    auto store = idem::reliability::open_store(db.where);
    idem::engine engine{*store, {.default_lease = lease, .purge_interval = milliseconds(0)}};
    int in_progress = 0, lost = 0;
    for (int k = 0; k < keys; ++k) {
      auto ctx = engine.make_context("Crash.run", "key-" + std::to_string(k), {.wait = milliseconds(0)});
      auto o = engine.execute(ctx, [] { return std::string("late"); }, idem::string_codec{});
      if (o.is_in_flight()) ++in_progress;
      else if (o.ran()) ++lost;
      else completed_by[k] = incarnation_of(o.value());
    }
    CHECK(in_progress == 0);
    CHECK(lost == 0);
  }

  // Effects per key.
  std::map<int, std::vector<int>> effects_of;
  {
    idem::reliability::effects fx{db.where};
    for (auto e : fx.all()) effects_of[e.key].push_back(e.incarnation);
  }

  int acquisitions = 0, replays = 0, bad_replays = 0, double_executions = 0, unexplained = 0, double_completions = 0;
  int errors = 0, kill_between = 0;
  for (auto& [inc, w] : log) {
    acquisitions += static_cast<int>(w.acquired.size());
    replays += static_cast<int>(w.replays.size());
    errors += static_cast<int>(w.errors.size());
    for (auto& [k, v] : w.replays)
      if (!completed_by.contains(k) || incarnation_of(v) != completed_by[k]) ++bad_replays;
    if (killed.contains(inc))
      for (int k : w.effected)
        if (!w.completed.contains(k)) ++kill_between;
  }
  for (int k = 0; k < keys; ++k) {
    const auto& rows = effects_of[k];
    int completions = 0;
    for (auto& [inc, w] : log) completions += w.completed.contains(k) ? 1 : 0;
    if (completions > 1) ++double_completions;
    if (rows.empty()) continue;
    double_executions += static_cast<int>(rows.size()) - 1;
    // The record's result is one of this key's effects; every other effect is explained by a kill
    // of its holder after the action started and before its completion was confirmed.
    const int winner = completed_by.contains(k) ? completed_by[k] : -1;
    CHECK(std::count(rows.begin(), rows.end(), winner) == 1);
    for (int inc : rows) {
      if (inc == winner) continue;
      const bool explained = killed.contains(inc) && log[inc].acquired.contains(k) && !log[inc].completed.contains(k);
      if (!explained) ++unexplained;
    }
  }
  const int steals = acquisitions - keys;

  std::printf(
      "crash[%s/%s]: %d keys, %d workers, lease %lld ms, %.1f s: %d kills (%d after an effect, before its "
      "completion), %d steals, %d replays, %d double executions (%d unexplained by a kill), %d errors retried, "
      "%d lost, %d double completions\n",
      kind.c_str(), mode.c_str(), keys, workers, static_cast<long long>(lease.count()), run_seconds, kills,
      kill_between, steals, replays, double_executions, unexplained, errors,
      keys - static_cast<int>(completed_by.size()), double_completions);
  std::fflush(stdout);

  CHECK(static_cast<int>(completed_by.size()) == keys);
  CHECK(bad_replays == 0);
  CHECK(double_completions == 0);
  CHECK(unexplained == 0);
  CHECK(kills > 0);
  if (mode == "join") CHECK(double_executions == 0);
  for (int k = 0; k < keys; ++k) CHECK(!effects_of[k].empty());
}

// The paused-holder scenario: SIGSTOP the holder past its lease, let another worker steal and
// complete, SIGCONT the holder: its completion must be refused by the fencing token.
void paused_holder(const std::string& kind, const std::string& mode = "hold") {
  run_database db(kind, "paused_" + std::string(mode == "hold" ? "alone" : "tx"));
  int pipefd[2];
  REQUIRE(::pipe2(pipefd, O_CLOEXEC) == 0);
  const fs::path holder_log = db.tmp.dir / "holder.log", thief_log = db.tmp.dir / "thief.log";

  child holder(worker_argv(db.where, mode, 1, 1, holder_log), pipefd[1]);
  ::close(pipefd[1]);
  pollfd p{pipefd[0], POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);  // the holder's action started: it holds the key
  holder.signal(SIGSTOP);
  ::close(pipefd[0]);

  const auto stolen_at = steady_clock::now();
  child thief(worker_argv(db.where, "steal", 2, 1, thief_log));
  REQUIRE(thief.wait_for(milliseconds(20000)));
  const double steal_ms = duration<double, std::milli>(steady_clock::now() - stolen_at).count();
  REQUIRE(thief.exited_cleanly());
  auto t = read_log(thief_log);
  CHECK(t.acquired.contains(0));
  CHECK(t.completed.contains(0));

  holder.signal(SIGCONT);
  REQUIRE(holder.wait_for(milliseconds(20000)));
  REQUIRE(holder.exited_cleanly());
  auto h = read_log(holder_log);
  CHECK(!h.completed.contains(0));
  REQUIRE(h.errors.size() == 1);
  CHECK(h.errors[0] == " lease_lost_error");
  REQUIRE(h.failures.size() == 1);
  CHECK(h.failures[0] == " completion lease_lost_error");

  auto store = idem::reliability::open_store(db.where);
  idem::engine engine{*store, {.default_lease = lease, .purge_interval = milliseconds(0)}};
  auto ctx = engine.make_context("Crash.run", "key-0", {.wait = milliseconds(0)});
  auto o = engine.execute(ctx, [] { return std::string("late"); }, idem::string_codec{});
  REQUIRE(o.is_replay());
  CHECK(o.value() == "inc2");
  // The effects: alone, the resumed holder's work happened (the fencing keeps the record, it cannot
  // undo the work); inside a transaction its commit was refused and rolled its work back.
  idem::reliability::effects fx{db.where};
  std::vector<int> by;
  for (auto e : fx.all()) by.push_back(e.incarnation);
  std::sort(by.begin(), by.end());
  if (mode == "hold") CHECK(by == std::vector<int>{1, 2});
  else CHECK(by == std::vector<int>{2});
  std::printf("paused[%s%s]: %zu effect(s) kept; holder stopped past its %lld ms lease; thief stole and completed after %.0f ms; "
              "holder resumed: completion refused (%s), on_failed{%s}; record keeps the thief's result\n",
              kind.c_str(), mode == "hold" ? "" : "/in a transaction", by.size(),
              static_cast<long long>(lease.count()), steal_ms, h.errors[0].c_str() + 1,
              h.failures[0].c_str() + 1);
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("crash.sqlite.autonomous") { crash_run("sqlite", "autonomous"); }
TEST_CASE("crash.sqlite.join") { crash_run("sqlite", "join"); }
TEST_CASE("crash.postgres.autonomous") { crash_run("postgres", "autonomous"); }
TEST_CASE("crash.postgres.join") { crash_run("postgres", "join"); }
TEST_CASE("crash.redis.autonomous") { crash_run("redis", "autonomous"); }
TEST_CASE("crash.redis_cluster.autonomous") { crash_run("redis_cluster", "autonomous"); }
TEST_CASE("paused.sqlite") { paused_holder("sqlite"); }
TEST_CASE("paused.postgres") { paused_holder("postgres"); }
TEST_CASE("paused.redis") { paused_holder("redis"); }
TEST_CASE("paused.redis_cluster") { paused_holder("redis_cluster"); }
TEST_CASE("paused.sqlite.transaction") { paused_holder("sqlite", "hold-tx"); }
TEST_CASE("paused.postgres.transaction") { paused_holder("postgres", "hold-tx"); }
