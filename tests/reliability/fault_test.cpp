// tests/reliability/fault_test.cpp — store faults (ctest label `fault`): a private PostgreSQL or
// redis-server of this test is killed (SIGKILL), stopped cleanly, or frozen (SIGSTOP) in the
// middle of a run and restarted on the same data and port. See docs/reliability.md.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <idem/engine.hpp>
#include <idem/postgres_store.hpp>
#include <idem/redis_store.hpp>
#include <idem/sqlite_store.hpp>
#include <sqlite3.h>

#include <atomic>
#include <mutex>

#include "process.hpp"
#include "support/eventually.hpp"

namespace fs = std::filesystem;
using namespace std::chrono;
using idem::reliability::child;

namespace {

constexpr int keys = 20;

struct scratch {
  fs::path dir;
  scratch() {
    std::string templ = (fs::temp_directory_path() / "idem-fault.XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir = templ;
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// A free port for a server this test restarts on the same port: tests/support/ports.sh's rule
// (below the ephemeral range, clear of the cluster fixture's ports).
int free_port() {
  FILE* out = ::popen("bash -c 'source " IDEM_SUPPORT_DIR "/ports.sh && pick_port fault_test'", "r");
  if (out == nullptr) throw std::runtime_error("cannot run ports.sh");
  char line[32] = {};
  const bool read = std::fgets(line, sizeof line, out) != nullptr;
  if (::pclose(out) != 0 || !read) throw std::runtime_error("ports.sh found no free port");
  return std::stoi(line);
}

double ms_since(steady_clock::time_point t) { return duration<double, std::milli>(steady_clock::now() - t).count(); }

// A redis-server of this test, persisting every write (appendonly yes, appendfsync always).
class private_redis {
 public:
  private_redis() : port_(free_port()) { start(); }
  ~private_redis() {
    if (server_) {
      server_->signal(SIGCONT);
      server_->signal(SIGKILL);
    }
  }
  int port() const { return port_; }
  child& server() { return *server_; }
  void start() {
    server_ = std::make_unique<child>(std::vector<std::string>{
        "/bin/sh", "-c",
        "exec redis-server --bind 127.0.0.1 --port " + std::to_string(port_) +
            " --save '' --appendonly yes --appendfsync always --dir " + dir_.dir.string() +
            " --logfile " + (dir_.dir / "redis.log").string()});
    // Ready once it answers PING (bounded).
    const auto until = steady_clock::now() + seconds(20);
    for (;;) {
      redisContext* c = redisConnect("127.0.0.1", port_);
      bool ok = false;
      if (c != nullptr && c->err == 0) {
        auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
        ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
        if (r != nullptr) freeReplyObject(r);
      }
      if (c != nullptr) redisFree(c);
      if (ok) return;
      REQUIRE(server_->running());
      REQUIRE(steady_clock::now() < until);
      std::this_thread::sleep_for(milliseconds(10));  // no event tells when a server listens
    }
  }
  void kill_hard() {
    server_->signal(SIGKILL);
    REQUIRE(server_->wait_for(seconds(10)));
  }
  void stop_clean() {
    server_->signal(SIGTERM);
    REQUIRE(server_->wait_for(seconds(20)));
  }

 private:
  scratch dir_;
  int port_;
  std::unique_ptr<child> server_;
};

// A PostgreSQL server of this test (tests/support/postgres-server.sh: fsync off, so what survives
// is what a killed server process keeps, not a power loss).
class private_postgres {
 public:
  private_postgres() { script("start"); }
  ~private_postgres() {
    signal_all(SIGCONT);
    script("stop", false);
  }
  std::string conninfo() const {
    std::ifstream in(state_.dir / "conninfo");
    std::string line;
    std::getline(in, line);
    return line;
  }
  void script(const std::string& action, bool required = true) {
    const std::string cmd = "IDEM_PG_DURABLE=1 bash " IDEM_SUPPORT_DIR "/postgres-server.sh " + action + " " + state_.dir.string() +
                            " >/dev/null 2>" + (state_.dir / "script.err").string();
    const int rc = std::system(cmd.c_str());
    if (required) REQUIRE(rc == 0);
  }
  // The server's log (postgres-server.sh: log_line_prefix '%m [%p] %a ', warnings and errors).
  std::string server_log() const {
    std::ifstream dirfile(state_.dir / "datadir");
    std::string root;
    if (!std::getline(dirfile, root)) return {};
    std::ifstream in(fs::path(root) / "server.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // SIGSTOP / SIGCONT the postmaster and every backend, except the process `spare` (if not 0);
  // the postmaster first, or with `postmaster_last` after the backends.
  void signal_all(int sig, pid_t spare = 0, bool postmaster_last = false) {
    std::ifstream dirfile(state_.dir / "datadir");
    std::string root;
    if (!std::getline(dirfile, root)) return;
    std::ifstream pidfile(fs::path(root) / "data" / "postmaster.pid");
    pid_t master = 0;
    if (!(pidfile >> master)) return;
    if (!postmaster_last) ::kill(master, sig);
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(e.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      if (close == std::string::npos) continue;
      char state = 0;
      pid_t ppid = 0;
      std::istringstream rest(line.substr(close + 2));
      rest >> state >> ppid;
      if (ppid == master && std::stoi(name) != spare) ::kill(std::stoi(name), sig);
    }
    if (postmaster_last) ::kill(master, sig);
  }

 private:
  scratch state_;
};

std::unique_ptr<idem::store> redis_store_on(int port) {
  idem::redis_store_options o;
  o.port = port;
  o.connect_timeout = milliseconds(200);
  o.command_timeout = milliseconds(300);
  o.fallback_recheck = milliseconds(20);
  return std::make_unique<idem::redis_store>(o);
}

std::unique_ptr<idem::postgres_store> postgres_store_on(const std::string& conninfo) {
  auto s = std::make_unique<idem::postgres_store>(
      idem::postgres_store_options{.conninfo = conninfo + " connect_timeout=2", .pool_size = 4,
                                   .operation_timeout = milliseconds(500), .log = nullptr});
  s->create_schema();
  return s;
}

// The server process ids of the store's pooled connections (application_name "idem"), asked on a
// connection of the test's own.
std::vector<pid_t> pool_backends(const std::string& conninfo) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  REQUIRE(PQstatus(c) == CONNECTION_OK);
  PGresult* r = PQexec(c, "SELECT pid FROM pg_stat_activity WHERE application_name = 'idem'");
  REQUIRE(PQresultStatus(r) == PGRES_TUPLES_OK);
  std::vector<pid_t> pids;
  for (int i = 0; i < PQntuples(r); ++i) pids.push_back(static_cast<pid_t>(std::stoi(PQgetvalue(r, i, 0))));
  PQclear(r);
  PQfinish(c);
  return pids;
}

// True once process `pid` (a backend: a child of the postmaster, not of the test) has ended.
bool process_ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X';  // a zombie the postmaster has not reaped yet
}

// How the statement that backend `pid` ran last ended, from the server's log: cancelled by our
// cancel request, by statement_timeout, or not at all (it ran).
std::string how_backend_ended(const std::string& log, pid_t pid) {
  const std::string tag = "[" + std::to_string(pid) + "]";
  for (std::size_t at = log.find(tag); at != std::string::npos; at = log.find(tag, at + 1)) {
    const std::string line = log.substr(at, log.find('\n', at) - at);
    if (line.find("canceling statement due to user request") != std::string::npos)
      return "its statement was cancelled by the store's cancel request";
    if (line.find("canceling statement due to statement timeout") != std::string::npos)
      return "its statement was stopped by statement_timeout";
  }
  return "its statement was not cancelled";
}

// True if `ctx` can be claimed now (and then holds it); false while the record is held or the
// server does not answer yet.
bool claimable(idem::store& store, const idem::context& ctx) {
  try {
    return std::holds_alternative<idem::acquired>(store.try_acquire(ctx));
  } catch (const idem::store_unavailable_error&) {
    return false;
  }
}

// Takes a claim so that the store's pool holds exactly one connection, and returns the pid of the
// server process behind it: the next statement goes to it.
pid_t warm_one_backend(idem::store& store, const std::string& conninfo) {
  auto warm = idem::context{.id = {"Fault.frozen", "warm"}, .lease = milliseconds(5000), .wait = milliseconds(0)};
  REQUIRE(std::holds_alternative<idem::acquired>(store.try_acquire(warm)));
  const std::vector<pid_t> backends = pool_backends(conninfo);
  REQUIRE(backends.size() == 1);
  return backends.front();
}

// A claim sent to a frozen server: true when it failed with outcome_unknown_error naming
// try_acquire, false for a plain store_unavailable_error.
bool claim_is_outcome_unknown(idem::store& store, const idem::context& ctx) {
  try {
    (void)store.try_acquire(ctx);
  } catch (const idem::outcome_unknown_error& e) {
    CHECK(e.operation() == "try_acquire");
    return true;
  } catch (const idem::store_unavailable_error&) {
  }
  return false;
}

// What the store found when it settled the claim that was not answered.
std::string settled_as(const idem::postgres_store_statistics& s) {
  if (s.unanswered_released > 0)
    return "the server ran the claim on waking (the cancel lost the race); the store released it";
  if (s.unanswered_void > 0) return "the claim never took effect (the cancel won, or it was never run)";
  return "not settled yet";
}

// Completes `keys` records, kills (or stops) the server mid-run, checks that calls fail fast,
// that a waiter blocked in the store returns within its wait, restarts the server, and checks
// that the same store serves again and every completed record replays (no action ran twice).
template <class Server, class Kill, class Restart>
void kill_and_restart(const char* label, idem::store& store, Kill kill, Restart restart) {
  idem::engine engine{store, {.default_lease = milliseconds(2000), .purge_interval = milliseconds(0)}};
  std::vector<int> runs(keys, 0);
  auto call = [&](int k, milliseconds wait) {
    auto ctx = engine.make_context("Fault.run", "key-" + std::to_string(k), {.wait = wait});
    return engine.execute(ctx, [&] {
      ++runs[static_cast<std::size_t>(k)];
      return std::string("v") + std::to_string(k);
    }, idem::string_codec{});
  };
  for (int k = 0; k < keys / 2; ++k) REQUIRE(call(k, milliseconds(0)).ran());

  // A waiter blocked inside the store on a record another caller holds.
  auto holder_ctx = engine.make_context("Fault.run", "held", {.wait = milliseconds(0)});
  auto held = store.try_acquire(holder_ctx);
  REQUIRE(std::holds_alternative<idem::acquired>(held));
  constexpr milliseconds waiter_wait{1500};
  auto waiter = std::async(std::launch::async, [&] {
    const auto t = steady_clock::now();
    try {
      auto ctx = engine.make_context("Fault.run", "held", {.wait = waiter_wait});
      (void)store.try_acquire(ctx);
    } catch (const idem::store_error&) {
    }
    return ms_since(t);
  });
  std::this_thread::sleep_for(milliseconds(100));  // let it block (there is no event to observe)
  kill();

  // Calls fail fast with store_unavailable_error.
  double worst = 0;
  int failed = 0;
  for (int k = keys / 2; k < keys / 2 + 5; ++k) {
    const auto t = steady_clock::now();
    try {
      (void)call(k, milliseconds(0));
    } catch (const idem::store_unavailable_error&) {
      ++failed;
    }
    worst = std::max(worst, ms_since(t));
  }
  CHECK(failed == 5);
  CHECK(worst < 10000);  // generous: catches a hang, not a slow call
  const double waiter_ms = waiter.get();
  CHECK(waiter_ms < waiter_wait.count() + 5000);
  for (int k = keys / 2; k < keys / 2 + 5; ++k) CHECK(runs[static_cast<std::size_t>(k)] == 0);

  restart();
  // The same process and store serve again; every completed record replays.
  int replays = 0, ran = 0;
  const auto back = steady_clock::now();
  for (int attempt = 0;; ++attempt) {
    try {
      (void)call(0, milliseconds(0));
      break;
    } catch (const idem::store_unavailable_error&) {
      REQUIRE(attempt < 100);  // the pool reconnects on the next call, not after many
    }
  }
  const double recovery_ms = ms_since(back);
  for (int k = 0; k < keys; ++k) {
    auto o = call(k, milliseconds(0));
    if (o.is_replay()) {
      ++replays;
      CHECK(o.value() == "v" + std::to_string(k));
    } else if (o.ran()) {
      ++ran;
    }
  }
  CHECK(replays == keys / 2);
  CHECK(ran == keys / 2);
  int twice = 0;
  for (int k = 0; k < keys; ++k) twice += runs[static_cast<std::size_t>(k)] > 1 ? 1 : 0;
  CHECK(twice == 0);
  std::printf("fault[%s]: %d/5 calls failed with store_unavailable_error, worst %.0f ms; waiter (wait %lld ms) "
              "returned after %.0f ms; after the restart first call served after %.0f ms; %d/%d completed records "
              "replayed, %d lost, %d actions run twice\n",
              label, failed, worst, static_cast<long long>(waiter_wait.count()), waiter_ms, recovery_ms, replays,
              keys / 2, keys / 2 - replays, twice);
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("fault.redis.sigkill_restart") {
  private_redis server;
  auto store = redis_store_on(server.port());
  kill_and_restart<private_redis>("redis/SIGKILL, appendonly+fsync always", *store, [&] { server.kill_hard(); },
                                  [&] { server.start(); });
}

TEST_CASE("fault.redis.clean_stop_restart") {
  private_redis server;
  auto store = redis_store_on(server.port());
  kill_and_restart<private_redis>("redis/SIGTERM", *store, [&] { server.stop_clean(); }, [&] { server.start(); });
}

TEST_CASE("fault.postgres.sigkill_restart") {
  private_postgres server;
  auto store = postgres_store_on(server.conninfo());
  kill_and_restart<private_postgres>("postgres/SIGKILL", *store, [&] { server.script("kill"); },
                                     [&] { server.script("restart"); });
}

TEST_CASE("fault.postgres.clean_stop_restart") {
  private_postgres server;
  auto store = postgres_store_on(server.conninfo());
  kill_and_restart<private_postgres>("postgres/fast stop", *store, [&] { server.script("halt"); },
                                     [&] { server.script("restart"); });
}

// Defect: a complete sent to a frozen Redis was reported as store_unavailable_error and
// Redis still ran it when it woke. It must be reported as outcome_unknown_error.
TEST_CASE("fault.redis.frozen_complete_is_outcome_unknown") {
  private_redis server;
  auto store = redis_store_on(server.port());
  auto ctx = idem::context{.id = {"Fault.frozen", "k"}, .lease = milliseconds(5000), .wait = milliseconds(0)};
  auto a = store->try_acquire(ctx);
  REQUIRE(std::holds_alternative<idem::acquired>(a));
  const auto token = std::get<idem::acquired>(a).token;
  server.server().signal(SIGSTOP);
  const auto t = steady_clock::now();
  bool unknown = false;
  try {
    store->complete(ctx.id, token, idem::payload::none(), ctx.ttl);
  } catch (const idem::outcome_unknown_error& e) {
    unknown = true;
    CHECK(e.operation() == "complete");
  } catch (const idem::store_unavailable_error&) {
  }
  const double fail_ms = ms_since(t);
  server.server().signal(SIGCONT);
  CHECK(unknown);
  CHECK(fail_ms < 10000);
  // What the caller may assume: nothing. Here Redis ran the command when it woke.
  bool took_effect = false;
  for (int attempt = 0; attempt < 100 && !took_effect; ++attempt) {
    try {
      took_effect = std::holds_alternative<idem::duplicate>(store->try_acquire(ctx));
      break;
    } catch (const idem::store_unavailable_error&) {
    }
  }
  // A refused call (nothing sent) is still a plain store_unavailable_error. The first call after
  // the kill may still be sent on a pooled connection the kernel had not closed yet.
  server.kill_hard();
  bool plain = false;
  for (int attempt = 0; attempt < 3 && !plain; ++attempt) {
    try {
      store->complete(ctx.id, token, idem::payload::none(), ctx.ttl);
    } catch (const idem::outcome_unknown_error&) {
    } catch (const idem::store_unavailable_error&) {
      plain = true;
    }
  }
  CHECK(plain);
  std::printf("fault[redis/SIGSTOP]: complete reported outcome_unknown_error after %.0f ms (command timeout 300 ms); "
              "Redis %s it when it woke\n",
              fail_ms, took_effect ? "ran" : "did not run");
  std::fflush(stdout);
}

// Defect: a claim sent to a frozen PostgreSQL timed out and ran when the server woke,
// leaving the record in progress under a token nobody holds: the key answered in flight for a
// whole lease. Now the store cancels the statement and, because the cancel may lose the race,
// releases what the claim left (fenced by its token) once the server answers: the key is
// claimable again long before the lease (30 s) would have ended. Both outcomes of the race are
// accepted (the claim ran and was released, or never took effect); the test reports which.
TEST_CASE("fault.postgres.frozen_claim_is_outcome_unknown") {
  private_postgres server;
  auto store = postgres_store_on(server.conninfo());
  const pid_t receiver = warm_one_backend(*store, server.conninfo());  // the claim goes to this one
  server.signal_all(SIGSTOP);
  constexpr milliseconds lease{30000};
  auto ctx = idem::context{.id = {"Fault.frozen", "k"}, .lease = lease, .wait = milliseconds(0)};
  const auto t = steady_clock::now();
  const bool unknown = claim_is_outcome_unknown(*store, ctx);
  const double fail_ms = ms_since(t);
  server.signal_all(SIGCONT);
  const auto woke = steady_clock::now();
  CHECK(unknown);
  CHECK(fail_ms < 10000);
  // The backend that received the claim runs it (or has it cancelled) and ends: the client closed
  // its connection. Only then is the claim's outcome final (looking earlier could take the key
  // before the claim runs). If it ran, it started at the wake-up at the earliest and its lease
  // ends after woke + lease: claimable before that means the store released it.
  REQUIRE(idem::test::eventually([&] { return process_ended(receiver); }, seconds(20)));
  const bool again = idem::test::eventually([&] { return claimable(*store, ctx); },
                                            duration_cast<milliseconds>(lease - (steady_clock::now() - woke)));
  const double recovered_ms = ms_since(woke);
  CHECK(again);
  CHECK(recovered_ms < static_cast<double>(lease.count()));
  const auto stats = store->statistics();
  CHECK(stats.cancels_requested >= 1);
  CHECK(stats.unanswered >= 1);
  CHECK(stats.unanswered_dropped == 0);
  std::printf("fault[postgres/SIGSTOP]: claim reported outcome_unknown_error after %.0f ms (operation timeout 500 ms); "
              "after the wake-up: %s (server log: %s); claimable again after %.0f ms (lease %lld ms); cancels "
              "requested %llu, taken by the postmaster %llu\n",
              fail_ms, settled_as(stats).c_str(), how_backend_ended(server.server_log(), receiver).c_str(),
              recovered_ms, static_cast<long long>(lease.count()),
              static_cast<unsigned long long>(stats.cancels_requested),
              static_cast<unsigned long long>(stats.cancels_delivered));
  std::fflush(stdout);
}

// The server answers again while the backend that received the claim is still frozen: releasing
// then would find nothing, and the claim would run afterwards and hold the key for the whole lease.
// The store must wait for that backend to end, then release.
TEST_CASE("fault.postgres.frozen_backend_wakes_after_the_server") {
  private_postgres server;
  auto store = postgres_store_on(server.conninfo());
  const pid_t receiver = warm_one_backend(*store, server.conninfo());  // the claim goes to this one
  server.signal_all(SIGSTOP);
  constexpr milliseconds lease{30000};
  auto ctx = idem::context{.id = {"Fault.frozen", "late"}, .lease = lease, .wait = milliseconds(0)};
  const bool unknown = claim_is_outcome_unknown(*store, ctx);
  REQUIRE(unknown);
  server.signal_all(SIGCONT, receiver);  // everything but the claim's backend
  // The server answers (another key), and the store has looked and found the receiver running.
  auto other = idem::context{.id = {"Fault.frozen", "other"}, .lease = milliseconds(5000), .wait = milliseconds(0)};
  CHECK(idem::test::eventually([&] { return claimable(*store, other); }, seconds(20)));
  CHECK(idem::test::eventually([&] { return store->statistics().unanswered_backend_alive >= 1; }, seconds(20)));
  auto before = store->statistics();
  CHECK(before.unanswered_released + before.unanswered_void + before.unanswered_dropped == 0);  // still waiting
  ::kill(receiver, SIGCONT);
  const auto woke = steady_clock::now();
  REQUIRE(idem::test::eventually([&] { return process_ended(receiver); }, seconds(20)));
  const bool again = idem::test::eventually([&] { return claimable(*store, ctx); },
                                            duration_cast<milliseconds>(lease - (steady_clock::now() - woke)));
  const double recovered_ms = ms_since(woke);
  CHECK(again);
  CHECK(recovered_ms < static_cast<double>(lease.count()));
  const auto stats = store->statistics();
  CHECK(stats.unanswered >= 1);
  CHECK(stats.unanswered_dropped == 0);
  std::printf("fault[postgres/SIGSTOP, claim's backend woken last]: the store waited for the backend (%llu checks "
              "found it running); after it woke: %s; claimable again after %.0f ms (lease %lld ms)\n",
              static_cast<unsigned long long>(stats.unanswered_backend_alive), settled_as(stats).c_str(),
              recovered_ms, static_cast<long long>(lease.count()));
  std::fflush(stdout);
}

// The other side of the race, forced: on waking, the claim blocks on a table lock the test holds,
// so it is still running when the cancel (or statement_timeout) reaches it, and never takes
// effect. The store must settle it as void (nothing to release) and the key is claimable as soon as
// the lock is gone.
TEST_CASE("fault.postgres.frozen_claim_cancelled_on_waking") {
  private_postgres server;
  auto store = postgres_store_on(server.conninfo());
  const pid_t receiver = warm_one_backend(*store, server.conninfo());  // the claim goes to this one
  // The test's own session locks the table; its backend is not frozen.
  PGconn* locker = PQconnectdb(server.conninfo().c_str());
  REQUIRE(PQstatus(locker) == CONNECTION_OK);
  PGresult* r = PQexec(locker, "BEGIN; LOCK TABLE idem_records IN ACCESS EXCLUSIVE MODE");
  REQUIRE(PQresultStatus(r) == PGRES_COMMAND_OK);
  PQclear(r);
  server.signal_all(SIGSTOP, PQbackendPID(locker));
  constexpr milliseconds lease{30000};
  auto ctx = idem::context{.id = {"Fault.frozen", "cancelled"}, .lease = lease, .wait = milliseconds(0)};
  const bool unknown = claim_is_outcome_unknown(*store, ctx);
  REQUIRE(unknown);
  // Backends first, as a host waking up resumes them all at once: woken before its backend, the
  // postmaster would signal the cancel to a stopped process, which then drops it (a cancel that
  // arrives while a backend reads its next command is ignored) and statement_timeout would stop
  // the claim 500 ms later instead.
  server.signal_all(SIGCONT, 0, /*postmaster_last=*/true);
  const auto woke = steady_clock::now();
  REQUIRE(idem::test::eventually([&] { return process_ended(receiver); }, seconds(20)));
  const double receiver_ms = ms_since(woke);
  r = PQexec(locker, "ROLLBACK");
  PQclear(r);
  PQfinish(locker);
  const bool again = idem::test::eventually([&] { return claimable(*store, ctx); },
                                            duration_cast<milliseconds>(lease - (steady_clock::now() - woke)));
  const double recovered_ms = ms_since(woke);
  CHECK(again);
  CHECK(recovered_ms < static_cast<double>(lease.count()));
  // Settled as void: the store may only get to it after the key was claimed again (its release is
  // blocked by the lock too), so wait for it.
  CHECK(idem::test::eventually([&] { return store->statistics().unanswered_void >= 1; }, seconds(20)));
  const auto stats = store->statistics();
  CHECK(stats.unanswered_released == 0);
  const std::string ended = how_backend_ended(server.server_log(), receiver);
  CHECK(ended != "its statement was not cancelled");
  std::printf("fault[postgres/SIGSTOP, claim blocked on waking]: the claim's backend ended %.0f ms after the wake-up: "
              "%s; %s; claimable again after %.0f ms (lease %lld ms); cancels requested %llu, taken by the "
              "postmaster %llu\n",
              receiver_ms, ended.c_str(), settled_as(stats).c_str(), recovered_ms,
              static_cast<long long>(lease.count()), static_cast<unsigned long long>(stats.cancels_requested),
              static_cast<unsigned long long>(stats.cancels_delivered));
  std::fflush(stdout);
}

// Defect: under write-lock contention SQLite's backing-off busy handler let other
// writers take the lock many times in a row while a holder's extend waited; its lease lapsed and
// was stolen while its action ran. Three connections hammer the write lock while a holder with a
// 200 ms lease runs a 2 s action and another store on the file waits to steal the record.
TEST_CASE("fault.sqlite.extend_under_write_lock_contention") {
  scratch tmp;
  const std::string path = (tmp.dir / "idem.db").string();
  idem::sqlite_store holder_store{{.path = path, .synchronous = idem::sqlite_synchronous::normal}};
  idem::sqlite_store thief_store{{.path = path, .synchronous = idem::sqlite_synchronous::normal}};
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS noise (x INTEGER)", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  std::atomic<bool> stop{false};
  std::atomic<long> noise_commits{0};
  std::vector<std::thread> writers;
  for (int i = 0; i < 3; ++i)
    writers.emplace_back([&] {
      sqlite3* db = nullptr;
      sqlite3_open(path.c_str(), &db);
      sqlite3_busy_timeout(db, 5000);
      sqlite3_exec(db, "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr);
      while (!stop.load()) {
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) continue;
        sqlite3_exec(db, "INSERT INTO noise VALUES (1)", nullptr, nullptr, nullptr);
        std::this_thread::sleep_for(microseconds(300));  // a short write transaction
        if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK) ++noise_commits;
        std::this_thread::sleep_for(microseconds(300));  // and a short pause, as another store's calls
      }
      sqlite3_close(db);
    });
  std::vector<std::string> failures;
  std::mutex failures_mutex;
  idem::engine_hooks hooks;
  hooks.log = [&](const idem::log_record& r) {
    std::lock_guard lock(failures_mutex);
    if (r.level >= idem::log_level::warning) failures.push_back(r.message);
  };
  idem::engine engine{holder_store, {.default_lease = milliseconds(200), .purge_interval = milliseconds(0)},
                      std::move(hooks)};
  std::promise<void> started;
  auto thief = std::async(std::launch::async, [&] {
    started.get_future().wait();
    auto ctx = idem::context{.id = {"Fault.contended", "k"}, .lease = milliseconds(200), .wait = milliseconds(4000)};
    return thief_store.try_acquire(ctx);
  });
  auto ctx = engine.make_context("Fault.contended", "k");
  const auto t = steady_clock::now();
  bool lost = false;
  try {
    auto o = engine.execute(ctx, [&] {
      started.set_value();
      std::this_thread::sleep_for(seconds(2));  // ten leases of work
      return std::string("holder");
    }, idem::string_codec{});
    CHECK(o.ran());
    if (!o.ran()) started.set_value();
  } catch (const idem::lease_lost_error&) {
    lost = true;
  }
  const double held_ms = ms_since(t);
  auto stolen = thief.get();
  stop = true;
  for (auto& w : writers) w.join();
  CHECK(!lost);
  CHECK(std::holds_alternative<idem::duplicate>(stolen));
  std::printf("fault[sqlite/write-lock contention]: 3 writers committed %ld transactions while a 200 ms lease was held "
              "%.0f ms; lease %s; %zu warnings (failed extends)\n",
              noise_commits.load(), held_ms, lost ? "LOST" : "kept", failures.size());
  std::fflush(stdout);
}
