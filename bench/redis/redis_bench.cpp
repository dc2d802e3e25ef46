// bench/redis/redis_bench.cpp — idem::redis_store against the raw round-trip floor, on one server.
//
//   idem_bench_redis --address 127.0.0.1:6379 [--calls 2000] [--repeats 5] [--threads 8]
//                    [--wake-samples 300 (0 = skip)] [--only NAME]
//
// Workload (the peers in bench/peers run the same): a phase of `calls` calls with unique keys
// (first calls), then the same keys again (replays), then `calls` calls on one completed key (hot).
// Each phase is repeated and the median throughput is printed, with p50/p99 latency of one call.
// With --threads T every thread runs `calls` calls of its own.
//
// Rows:
//   raw       hiredis with no library: first call = SET NX PX + SET PX (2 round trips), replay = GET
//             (1 round trip): the floor any store with these round trips can reach.
//   raw-lua   the same commands, each wrapped in a one-line Lua script sent with EVALSHA: the floor
//             of a design whose every round trip is a script, as idem's is.
//   raw-idem  idem's own acquire and complete scripts with the arguments the store sends, from
//             hiredis with no library (keys, tokens and the encoded payload made in advance): the
//             floor of this protocol, so store / raw-idem is what the library itself costs.
//   store     redis_store::try_acquire + complete, then try_acquire (a connection per thread).
//   store-1conn  the same with pool_size = 1: every thread pipelines on one connection.
//   engine    idem::engine::execute with json_codec around the store: what an application calls.
//   engine+cache  the same with the local cache of completed records (10,000 entries).
// Plus the wake-up latency of a waiting duplicate: from just before the holder's complete() to the
// waiter's return; and (--only server-cost, not part of the default run) the Redis server time of
// each script path against plain commands, from INFO commandstats:
//   SERVER <path> <microseconds of server time per call>
//
// Every line starting with "RESULT" is machine-readable for bench/redis/run.sh:
//   RESULT <row> <threads> <phase> <ops/s> <p50 us> <p99 us>
// Benchmarks are not tests: nothing here asserts a time.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>

#include <idem/engine.hpp>
#include <idem/json_codec.hpp>
#include <idem/lease_token.hpp>
#include <idem/redis_store.hpp>

#include "scripts.hpp"  // runtime/redis: the store's scripts, for the raw-idem row
#include "bench_support.hpp"

namespace {

using namespace std::chrono_literals;
using idem::bench::clock_type;
using idem::bench::measure;
using idem::bench::percentile;
using idem::bench::raw_client;
using idem::bench::run_id;
using idem::bench::sample;

using idem::bench::receipt;

struct settings {
  std::string host = "127.0.0.1";
  int port = 6379;
  int calls = 2000;
  int repeats = 5;
  int threads = 8;
  int wake_samples = 300;
  std::string only;
};

sample median_of(std::vector<sample> runs) {
  std::sort(runs.begin(), runs.end(), [](const sample& a, const sample& b) { return a.ops_per_second < b.ops_per_second; });
  return runs[runs.size() / 2];
}

void report(const std::string& row, int threads, const std::string& phase, const sample& s) {
  std::printf("RESULT %s %d %s %.0f %.1f %.1f\n", row.c_str(), threads, phase.c_str(), s.ops_per_second, s.p50_us,
              s.p99_us);
  std::fflush(stdout);
}

// --- raw floor ---------------------------------------------------------------------------------

void bench_raw(const settings& s, int threads, bool scripted) {
  std::vector<std::unique_ptr<raw_client>> clients;
  for (int t = 0; t < threads; ++t) clients.push_back(std::make_unique<raw_client>(s.host, s.port));
  const std::string value = R"({"ok":true,"order_id":"o-1","amount":42})";
  std::string claim_sha, set_sha, get_sha;
  if (scripted) {
    claim_sha = clients[0]->load("return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', '3600000')");
    set_sha = clients[0]->load("return redis.call('SET', KEYS[1], ARGV[1], 'PX', '3600000')");
    get_sha = clients[0]->load("return redis.call('GET', KEYS[1])");
  }
  std::vector<sample> first, replay, hot;
  for (int r = 0; r < s.repeats; ++r) {
    const std::string id = run_id();
    auto key = [&](int t, int i) { return "bench:raw:" + id + ":" + std::to_string(t) + ":" + std::to_string(i); };
    auto& c = clients;
    first.push_back(measure(threads, s.calls, [&](int t, int i) {
      const std::string k = key(t, i);
      auto& client = *c[static_cast<std::size_t>(t)];
      if (scripted) {
        client.command({"EVALSHA", claim_sha, "1", k, "INPROGRESS"});
        client.command({"EVALSHA", set_sha, "1", k, value});
      } else {
        client.command({"SET", k, "INPROGRESS", "NX", "PX", "3600000"});
        client.command({"SET", k, value, "PX", "3600000"});
      }
    }));
    auto get = [&](int t, const std::string& k) {
      auto& client = *c[static_cast<std::size_t>(t)];
      if (scripted) {
        client.command({"EVALSHA", get_sha, "1", k});
      } else {
        client.command({"GET", k});
      }
    };
    replay.push_back(measure(threads, s.calls, [&](int t, int i) { get(t, key(t, i)); }));
    hot.push_back(measure(threads, s.calls, [&](int t, int) { get(t, key(0, 0)); }));
  }
  const std::string row = scripted ? "raw-lua" : "raw";
  report(row, threads, "first", median_of(first));
  report(row, threads, "replay", median_of(replay));
  report(row, threads, "hot", median_of(hot));
}

// idem's scripts through bare hiredis: what the protocol costs with no library around it.
void bench_raw_idem(const settings& s, int threads) {
  const auto& scripts = idem::detail::redis::scripts();
  std::vector<std::unique_ptr<raw_client>> clients;
  for (int t = 0; t < threads; ++t) clients.push_back(std::make_unique<raw_client>(s.host, s.port));
  clients[0]->load(std::string(scripts.acquire.source));
  clients[0]->load(std::string(scripts.complete.source));
  // What encode_payload makes of the store row's payload.
  const std::string payload = R"(16:application/json40:{"ok":true,"order_id":"o-1","amount":42}0:)";
  std::vector<sample> first, replay, hot;
  for (int r = 0; r < s.repeats; ++r) {
    const std::string id = run_id();
    // Keys and tokens of the store's shapes: <prefix>rec:<scope>:<64 hex>, 32 hex digits. The
    // arguments are the store's for a 30 s lease, a 1 h ttl and the default 1 min retention grace.
    auto digits = [](int t, int i, int width) {
      std::string n = std::to_string(t * 1'000'000 + i);
      return std::string(static_cast<std::size_t>(width) - n.size(), '0') + n;  // fixed width: no collisions
    };
    auto key = [&](int t, int i) { return "bench:raw-idem:rec:Bench.store:" + id + digits(t, i, 54); };
    auto token = [&](int t, int i) { return digits(t, i, 32); };
    std::vector<std::vector<std::string>> keys(static_cast<std::size_t>(threads));
    std::vector<std::vector<std::string>> tokens(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      for (int i = 0; i < s.calls; ++i) {
        keys[static_cast<std::size_t>(t)].push_back(key(t, i));
        tokens[static_cast<std::size_t>(t)].push_back(token(t, i));
      }
    }
    const std::string channel = "bench:raw-idem:evt:Bench.store:" + std::string(64, '0');
    // Thread `t` claims or replays the key of thread `owner`, call `i`.
    auto acquire = [&](int t, int owner, int i) {
      const auto oi = static_cast<std::size_t>(owner);
      const auto ii = static_cast<std::size_t>(i);
      return clients[static_cast<std::size_t>(t)]->command(
          {"EVALSHA", scripts.acquire.sha, "1", keys[oi][ii], tokens[oi][ii], "30000", "3600000", "-", "3660000", "0"});
    };
    // Each call checks the script's answer, so that the row measures the path the store takes.
    auto expect = [](bool ok, const char* what) {
      if (!ok) throw std::runtime_error(std::string("raw-idem: unexpected answer to ") + what);
    };
    first.push_back(measure(threads, s.calls, [&](int t, int i) {
      expect(acquire(t, t, i) == "A", "a first claim");
      const auto ti = static_cast<std::size_t>(t);
      const auto ii = static_cast<std::size_t>(i);
      expect(clients[ti]
                 ->command({"EVALSHA", scripts.complete.sha, "1", keys[ti][ii], tokens[ti][ii], "3600000", "3660000",
                            payload, channel, "PUBLISH"})
                 .starts_with("OK "),
             "complete");
    }));
    replay.push_back(measure(threads, s.calls, [&](int t, int i) { expect(acquire(t, t, i).starts_with("idem/"), "a replay"); }));
    hot.push_back(measure(threads, s.calls, [&](int t, int) { expect(acquire(t, 0, 0).starts_with("idem/"), "a replay"); }));
  }
  report("raw-idem", threads, "first", median_of(first));
  report("raw-idem", threads, "replay", median_of(replay));
  report("raw-idem", threads, "hot", median_of(hot));
}

// The server time of each of idem's script paths, and of the plain commands of the raw row, as
// Redis itself measures it (INFO commandstats, reset before each path). One client, one call at a
// time.
double server_usec_per_call(raw_client& c, const std::string& command) {
  const std::string info = c.command({"INFO", "commandstats"});
  const std::string head = "cmdstat_" + command + ":";
  const auto at = info.find(head);
  if (at == std::string::npos) throw std::runtime_error("INFO commandstats has no " + command);
  const auto per_call = info.find("usec_per_call=", at);
  return std::stod(info.substr(per_call + 14));
}

void bench_server_cost(const settings& s) {
  const auto& scripts = idem::detail::redis::scripts();
  raw_client c(s.host, s.port);
  c.load(std::string(scripts.acquire.source));
  c.load(std::string(scripts.complete.source));
  c.load(std::string(scripts.release.source));
  const std::string payload = R"(16:application/json40:{"ok":true,"order_id":"o-1","amount":42})" "0:";
  const std::string id = run_id();
  auto digits = [](int i, int width) {
    std::string n = std::to_string(i);
    return std::string(static_cast<std::size_t>(width) - n.size(), '0') + n;
  };
  auto key = [&](int i) { return "bench:server-cost:rec:Bench.store:" + id + digits(i, 54); };
  auto token = [&](int i) { return digits(i, 32); };
  const std::string channel = "bench:server-cost:evt:Bench.store:" + std::string(64, '0');
  auto acquire = [&](int i, const std::string& tok) {
    return c.command({"EVALSHA", scripts.acquire.sha, "1", key(i), tok, "30000", "3600000", "-", "3660000", "0"});
  };
  // Runs `call` for i in [from, from + calls) after a RESETSTAT, checks each answer, prints the cost.
  auto path = [&](const char* name, const char* command, int from, auto call) {
    c.command({"CONFIG", "RESETSTAT"});
    for (int i = from; i < from + s.calls; ++i) {
      if (!call(i)) throw std::runtime_error(std::string("server-cost: unexpected answer on ") + name);
    }
    std::printf("SERVER %s %.2f\n", name, server_usec_per_call(c, command));
    std::fflush(stdout);
  };
  path("claim", "evalsha", 0, [&](int i) { return acquire(i, token(i)) == "A"; });
  path("complete", "evalsha", 0, [&](int i) {
    return c
        .command(
            {"EVALSHA", scripts.complete.sha, "1", key(i), token(i), "3600000", "3660000", payload, channel, "PUBLISH"})
        .starts_with("OK ");
  });
  path("replay", "evalsha", 0, [&](int i) { return acquire(i, token(i)).starts_with("idem/"); });
  const int held = s.calls;
  for (int i = held; i < held + s.calls; ++i) acquire(i, token(i));
  path("in-flight", "evalsha", held, [&](int i) { return acquire(i, token(i + 1)).starts_with("B "); });
  path("release", "evalsha", held, [&](int i) {
    return c.command({"EVALSHA", scripts.release.sha, "1", key(i), token(i), channel, "PUBLISH"}) == "OK";
  });
  const std::string plain = "bench:server-cost:plain:" + id + ":";
  path("plain-set-nx", "set", 0, [&](int i) {
    return c.command({"SET", plain + std::to_string(i), "INPROGRESS", "NX", "PX", "3600000"}) == "OK";
  });
  path("plain-set", "set", 0, [&](int i) { return c.command({"SET", plain + std::to_string(i), payload, "PX", "3600000"}) == "OK"; });
  path("plain-get", "get", 0, [&](int i) { return c.command({"GET", plain + std::to_string(i)}) == payload; });
}

// --- idem --------------------------------------------------------------------------------------

idem::redis_store_options store_options(const settings& s, bool cache, std::size_t connections = 0) {
  idem::redis_store_options o;
  o.host = s.host;
  o.port = s.port;
  o.prefix = "bench:idem:";
  o.pool_size = connections != 0 ? connections : static_cast<std::size_t>(std::max(8, s.threads));
  if (cache) o.local_cache = {.max_entries = 100'000, .max_age = 60s};
  return o;
}

void bench_store(const settings& s, int threads, std::size_t connections, const std::string& row) {
  idem::redis_store store(store_options(s, false, connections));
  const idem::payload value{"application/json", R"({"ok":true,"order_id":"o-1","amount":42})", {}};
  std::vector<sample> first, replay, hot;
  for (int r = 0; r < s.repeats; ++r) {
    const std::string id = run_id();
    auto ctx = [&](int t, int i) {
      return idem::context{.id = idem::identity("Bench.store", id + ":" + std::to_string(t) + ":" + std::to_string(i)),
                           .ttl = 1h, .lease = 30s, .wait = 0ms};
    };
    first.push_back(measure(threads, s.calls, [&](int t, int i) {
      const auto c = ctx(t, i);
      auto result = store.try_acquire(c);
      store.complete(c.id, std::get<idem::acquired>(result).token, value, c.ttl);
    }));
    replay.push_back(measure(threads, s.calls, [&](int t, int i) {
      if (!std::holds_alternative<idem::duplicate>(store.try_acquire(ctx(t, i)))) throw std::runtime_error("not a duplicate");
    }));
    hot.push_back(measure(threads, s.calls, [&](int, int) {
      if (!std::holds_alternative<idem::duplicate>(store.try_acquire(ctx(0, 0)))) throw std::runtime_error("not a duplicate");
    }));
  }
  report(row, threads, "first", median_of(first));
  report(row, threads, "replay", median_of(replay));
  report(row, threads, "hot", median_of(hot));
}

void bench_engine(const settings& s, int threads, bool cache) {
  idem::redis_store store(store_options(s, cache));
  idem::engine engine(store);
  const std::string row = cache ? "engine+cache" : "engine";
  std::vector<sample> first, replay, hot;
  std::atomic<long> executions{0};
  for (int r = 0; r < s.repeats; ++r) {
    const std::string id = run_id();
    auto call = [&](int t, int i) {
      const std::string key = id + ":" + std::to_string(t) + ":" + std::to_string(i);
      const auto ctx = engine.make_context("Bench.charge", key);
      auto outcome = engine.execute<receipt>(
          ctx, [&] {
            executions.fetch_add(1, std::memory_order_relaxed);
            return receipt{true, key, 42};
          },
          idem::json_codec{});
      if (std::holds_alternative<idem::in_flight>(outcome)) throw std::runtime_error("in flight");
    };
    const long before = executions.load();
    first.push_back(measure(threads, s.calls, call));
    replay.push_back(measure(threads, s.calls, call));
    hot.push_back(measure(threads, s.calls, [&](int, int) { call(0, 0); }));
    if (executions.load() - before != static_cast<long>(threads) * s.calls) throw std::runtime_error("wrong execution count");
  }
  report(row, threads, "first", median_of(first));
  report(row, threads, "replay", median_of(replay));
  report(row, threads, "hot", median_of(hot));
}

// --- wake-up latency ---------------------------------------------------------------------------

void bench_wake(const settings& s) {
  idem::redis_store store(store_options(s, false));
  const std::string id = run_id();
  const idem::payload value{"application/json", "{}", {}};
  std::vector<double> latencies;
  for (int i = 0; i < s.wake_samples; ++i) {
    const idem::identity key("Bench.wake", id + ":" + std::to_string(i));
    const idem::context holder_ctx{.id = key, .ttl = 1h, .lease = 30s, .wait = 0ms};
    const auto token = std::get<idem::acquired>(store.try_acquire(holder_ctx)).token;
    std::atomic<clock_type::time_point::rep> returned{0};
    std::thread waiter([&] {
      const idem::context ctx{.id = key, .ttl = 1h, .lease = 30s, .wait = 10s};
      auto r = store.try_acquire(ctx);
      returned = clock_type::now().time_since_epoch().count();
      if (!std::holds_alternative<idem::duplicate>(r)) std::fprintf(stderr, "waiter did not replay\n");
    });
    std::this_thread::sleep_for(3ms);  // let the waiter subscribe (a benchmark may sleep)
    const auto before = clock_type::now();
    store.complete(key, token, value, 1h);
    waiter.join();
    latencies.push_back(
        std::chrono::duration<double, std::micro>(clock_type::duration(returned.load()) - before.time_since_epoch()).count());
  }
  sample w;
  w.p50_us = percentile(latencies, 0.50);
  w.p99_us = percentile(latencies, 0.99);
  w.ops_per_second = 0;
  report("wake", 1, "wake", w);
  std::printf("RESULT wake-max 1 wake 0 %.1f %.1f\n", percentile(latencies, 1.0), percentile(latencies, 1.0));
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--address") {
      const std::string a = next();
      const auto colon = a.rfind(':');
      s.host = a.substr(0, colon);
      s.port = std::stoi(a.substr(colon + 1));
    } else if (arg == "--calls") {
      s.calls = std::stoi(next());
    } else if (arg == "--repeats") {
      s.repeats = std::stoi(next());
    } else if (arg == "--threads") {
      s.threads = std::stoi(next());
    } else if (arg == "--wake-samples") {
      s.wake_samples = std::stoi(next());
    } else if (arg == "--only") {
      s.only = next();
    } else {
      throw std::runtime_error("unknown argument " + arg);
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const settings s = parse(argc, argv);
    auto wanted = [&](const std::string& name) { return s.only.empty() || s.only == name; };
    std::printf("# idem_bench_redis: %d calls x %d repeats per phase, threads 1 and %d, redis at %s:%d\n", s.calls,
                s.repeats, s.threads, s.host.c_str(), s.port);
    for (int threads : {1, s.threads}) {
      if (wanted("raw")) bench_raw(s, threads, false);
      if (wanted("raw-lua")) bench_raw(s, threads, true);
      if (wanted("raw-idem")) bench_raw_idem(s, threads);
      if (wanted("store")) bench_store(s, threads, 0, "store");
      if (wanted("store-1conn")) bench_store(s, threads, 1, "store-1conn");
      if (wanted("engine")) bench_engine(s, threads, false);
      if (wanted("engine+cache")) bench_engine(s, threads, true);
    }
    if (wanted("wake") && s.wake_samples > 0) bench_wake(s);
    if (s.only == "server-cost") bench_server_cost(s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem_bench_redis: %s\n", e.what());
    return 1;
  }
}
