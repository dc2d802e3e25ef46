// bench/redis/redis_cluster_bench.cpp — idem::redis_store on a Redis Cluster against the same store
// on one redis-server and against the store's own scripts sent with bare hiredis to the right node.
//
//   idem_bench_redis_cluster --cluster <seeds file> --single <host:port> [--calls 1000] [--repeats 5]
//                            [--threads 8] [--warmup 200] [--only ROW]
//
// <seeds file> is what tests/support/redis-cluster.sh writes: one "host:port" per line.
//
// Workload (as bench/redis/redis_bench.cpp): per thread, `calls` first calls on unique keys (claim +
// complete, 2 round trips), then the same keys again (replays, 1 round trip). Threads 1, then
// --threads. For each thread count every row is set up and warmed up (--warmup first calls and
// replays per thread on keys of their own, untimed: every connection open, every slot map learned,
// every script cached), then each row is sampled --repeats times, the rows in a rotating order so
// that a drifting machine load treats them alike.
//
// Rows:
//   cluster-raw    idem's acquire and complete scripts with the arguments the store sends, from bare
//                  hiredis: each thread has one connection per master, and each call goes to the
//                  master of its record key's slot (hash_slot of store.record_key(id), slot map from
//                  CLUSTER NODES). Keys, channels, tokens and the encoded payload are made in
//                  advance; the slot is computed per call. The floor of the protocol on a cluster.
//   cluster-store  redis_store with cluster.enabled (host:port = the first seed, cluster.seeds = the
//                  others), pool_size = max(8, threads) per master.
//   single-raw     the same scripts through bare hiredis to the single redis-server (context).
//   single-store   redis_store on the single redis-server.
//
// Machine-readable lines for bench/redis/cluster_run.sh and cluster_summarize.awk:
//   RESULT <row> <threads> <phase> <ops/s> <p50 us> <p99 us> <sample>
//   STATS <row> <threads> <phase> <round trips per call> <redirections> <slot map refreshes>
//         <cluster retries> <script reloads> <connections opened> <EVALSHA per call on the servers>
//         <other commands on the servers>
// STATS for the store rows only: redirections, retries and the two server counts (INFO
// commandstats of the row's masters, see server_counter) are the measured phase's;
// refreshes, reloads and connections are the store's totals so far. A benchmark, not a test:
// nothing here asserts a time.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <idem/identity.hpp>
#include <idem/lease_token.hpp>
#include <idem/redis_store.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "hash_slot.hpp"     // runtime/redis: the slot of a key, for the cluster-raw row
#include "record_codec.hpp"  // runtime/redis: encode_payload, what the complete script stores
#include "scripts.hpp"       // runtime/redis: the store's scripts
#include "bench_support.hpp"

namespace {

using namespace std::chrono_literals;
using idem::bench::clock_type;
using idem::bench::measure;
using idem::bench::percentile;
using idem::bench::raw_client;
using idem::bench::run_id;
using idem::bench::sample;
namespace rd = idem::detail::redis;

struct address {
  std::string host;
  int port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

address parse_address(const std::string& a) {
  const auto colon = a.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("not host:port: " + a);
  return {a.substr(0, colon), std::stoi(a.substr(colon + 1))};
}

struct settings {
  std::vector<address> seeds;  // the cluster
  address single;
  int calls = 1000;
  int repeats = 5;
  int threads = 8;
  int warmup = 200;
  std::string only;
};

void report(const std::string& row, int threads, const std::string& phase, const sample& s, int rep) {
  std::printf("RESULT %s %d %s %.0f %.1f %.1f %d\n", row.c_str(), threads, phase.c_str(), s.ops_per_second, s.p50_us,
              s.p99_us, rep);
  std::fflush(stdout);
}

// --- bare hiredis --------------------------------------------------------------------------------

// The masters of a cluster and which of them serves each slot, from CLUSTER NODES on the first seed.
struct slot_map {
  std::vector<address> masters;
  std::vector<int> owner = std::vector<int>(rd::slot_count, -1);  // index into masters
};

slot_map learn_slot_map(const address& seed) {
  raw_client c(seed.host, seed.port);
  const std::string nodes = c.command({"CLUSTER", "NODES"});
  slot_map map;
  std::size_t at = 0;
  while (at < nodes.size()) {
    std::size_t end = nodes.find('\n', at);
    if (end == std::string::npos) end = nodes.size();
    std::vector<std::string> fields;
    std::size_t from = at;
    while (from < end) {
      std::size_t space = nodes.find(' ', from);
      if (space == std::string::npos || space > end) space = end;
      if (space > from) fields.push_back(nodes.substr(from, space - from));
      from = space + 1;
    }
    at = end + 1;
    // <id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot>...
    if (fields.size() < 8 || fields[2].find("master") == std::string::npos ||
        fields[2].find("fail") != std::string::npos) {
      continue;
    }
    const std::string where = fields[1].substr(0, fields[1].find('@'));
    map.masters.push_back(parse_address(where));
    const int index = static_cast<int>(map.masters.size()) - 1;
    for (std::size_t f = 8; f < fields.size(); ++f) {
      const std::string& range = fields[f];
      if (range.starts_with("[")) continue;  // a slot being migrated or imported
      const auto dash = range.find('-');
      const int first = std::stoi(range.substr(0, dash));
      const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
      for (int s = first; s <= last; ++s) map.owner[static_cast<std::size_t>(s)] = index;
    }
  }
  for (int s = 0; s < rd::slot_count; ++s) {
    if (map.owner[static_cast<std::size_t>(s)] < 0)
      throw std::runtime_error("no master serves slot " + std::to_string(s));
  }
  return map;
}

// --- the keys every row uses -----------------------------------------------------------------------

const idem::payload the_value{"application/json", R"({"ok":true,"order_id":"o-1","amount":42})", {}};
constexpr auto the_ttl = 1h;
constexpr auto the_lease = 30s;

idem::redis_store_options store_options(const settings& s, bool cluster, int threads) {
  idem::redis_store_options o;
  const address& first = cluster ? s.seeds.front() : s.single;
  o.host = first.host;
  o.port = first.port;
  o.prefix = "bench:cluster:";
  o.pool_size = static_cast<std::size_t>(std::max(8, threads));
  if (cluster) {
    o.cluster.enabled = true;
    for (std::size_t i = 1; i < s.seeds.size(); ++i) o.cluster.seeds.push_back(s.seeds[i].text());
  }
  return o;
}

idem::identity identity_of(const std::string& run, int t, int i) {
  return idem::identity("Bench.store", run + ":" + std::to_string(t) + ":" + std::to_string(i));
}

// --- rows ----------------------------------------------------------------------------------------

// One row: a client set up for `threads` threads. prepare() makes a fresh run's keys (unmeasured),
// first() and replay() are one call of thread t.
class row {
 public:
  virtual ~row() = default;
  virtual std::string name() const = 0;
  virtual void prepare(const std::string& run, int calls) = 0;
  virtual void first(int t, int i) = 0;
  virtual void replay(int t, int i) = 0;
  virtual const idem::redis_store* store() const { return nullptr; }
};

void expect(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("unexpected answer to ") + what);
}

// idem's scripts through bare hiredis, each to the master of its key's slot (or to the one server).
class raw_row final : public row {
 public:
  raw_row(const settings& s, bool cluster, int threads)
      : cluster_(cluster), threads_(threads), shapes_(store_options(s, cluster, threads)) {
    if (cluster) {
      map_ = learn_slot_map(s.seeds.front());
    } else {
      map_.masters.push_back(s.single);
      std::fill(map_.owner.begin(), map_.owner.end(), 0);
    }
    clients_.resize(static_cast<std::size_t>(threads));
    for (auto& mine : clients_) {
      for (const address& m : map_.masters) mine.push_back(std::make_unique<raw_client>(m.host, m.port));
    }
    for (auto& c : clients_[0]) {
      c->command({"SCRIPT", "LOAD", scripts_.acquire.source});
      c->command({"SCRIPT", "LOAD", scripts_.complete.source});
    }
  }
  std::string name() const override { return cluster_ ? "cluster-raw" : "single-raw"; }

  // The keys and channels of the matching store row (`shapes_` never connects: record_key and channel
  // only format) and fresh tokens, made in advance.
  void prepare(const std::string& run, int calls) override {
    data_.assign(static_cast<std::size_t>(threads_), {});
    for (int t = 0; t < threads_; ++t) {
      auto& mine = data_[static_cast<std::size_t>(t)];
      mine.reserve(static_cast<std::size_t>(calls));
      for (int i = 0; i < calls; ++i) {
        const idem::identity id = identity_of(run, t, i);
        mine.push_back({shapes_.record_key(id), shapes_.channel(id), idem::lease_token::generate().to_string()});
      }
    }
  }

  // The arguments the store sends for a 30 s lease, a 1 h ttl and the default retention grace of 1 min.
  void first(int t, int i) override {
    const call_data& d = data_[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)];
    raw_client& c = client_for(t, d.key);
    expect(c.command({"EVALSHA", scripts_.acquire.sha, "1", d.key, d.token, lease_ms, ttl_ms, "-", px, "0"}) == "A",
           "a first claim");
    expect(
        c.command({"EVALSHA", scripts_.complete.sha, "1", d.key, d.token, ttl_ms, px, payload_, d.channel, publish()})
            .starts_with("OK "),
        "complete");
  }
  void replay(int t, int i) override {
    const call_data& d = data_[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)];
    expect(client_for(t, d.key)
               .command({"EVALSHA", scripts_.acquire.sha, "1", d.key, d.token, lease_ms, ttl_ms, "-", px, "0"})
               .starts_with("idem/"),
           "a replay");
  }

 private:
  static constexpr std::string_view lease_ms = "30000", ttl_ms = "3600000", px = "3660000";
  struct call_data {
    std::string key, channel, token;
  };
  std::string_view publish() const { return cluster_ ? "SPUBLISH" : "PUBLISH"; }
  // Routed per call, as a cluster client does: the slot of the key, then its master.
  raw_client& client_for(int t, const std::string& key) {
    const int m = cluster_ ? map_.owner[static_cast<std::size_t>(rd::hash_slot(key))] : 0;
    return *clients_[static_cast<std::size_t>(t)][static_cast<std::size_t>(m)];
  }

  const bool cluster_;
  const int threads_;
  const rd::script_set& scripts_ = rd::scripts();
  const idem::redis_store shapes_;
  const std::string payload_ = rd::encode_payload(the_value);
  slot_map map_;
  std::vector<std::vector<std::unique_ptr<raw_client>>> clients_;  // [thread][master]
  std::vector<std::vector<call_data>> data_;                       // [thread][call]
};

class store_row final : public row {
 public:
  store_row(const settings& s, bool cluster, int threads)
      : cluster_(cluster), store_(store_options(s, cluster, threads)) {}
  std::string name() const override { return cluster_ ? "cluster-store" : "single-store"; }
  void prepare(const std::string& run, int) override { run_ = run; }
  void first(int t, int i) override {
    const auto c = ctx(t, i);
    auto result = store_.try_acquire(c);
    store_.complete(c.id, std::get<idem::acquired>(result).token, the_value, c.ttl);
  }
  void replay(int t, int i) override {
    expect(std::holds_alternative<idem::duplicate>(store_.try_acquire(ctx(t, i))), "a replay");
  }
  const idem::redis_store* store() const override { return &store_; }

 private:
  idem::context ctx(int t, int i) const {
    return idem::context{.id = identity_of(run_, t, i), .ttl = the_ttl, .lease = the_lease, .wait = 0ms};
  }
  const bool cluster_;
  idem::redis_store store_;
  std::string run_;
};

// Commands the servers of a row ran, from INFO commandstats: EVALSHA, and every other command but
// the INFO asking, the replicas' REPLCONF and those the scripts call (GET, SET, TIME, PUBLISH,
// SPUBLISH: commandstats counts them too). Counted around a store row's phase, it shows whether the
// store sent anything beyond its scripts (CLUSTER SHARDS, ASKING, EVAL after NOSCRIPT, a retry).
struct command_count {
  long long evalsha = 0;
  long long other = 0;
};

class server_counter {
 public:
  server_counter(std::vector<address> servers) {
    for (const address& a : servers) clients_.push_back(std::make_unique<raw_client>(a.host, a.port));
  }
  command_count read() {
    command_count sum;
    for (auto& c : clients_) {
      const std::string info = c->command({"INFO", "commandstats"});
      std::size_t at = 0;
      while ((at = info.find("cmdstat_", at)) != std::string::npos) {
        const std::size_t colon = info.find(':', at);
        const std::string name = info.substr(at + 8, colon - at - 8);
        const std::size_t calls = info.find("calls=", colon);
        const long long n = std::stoll(info.substr(calls + 6));
        if (name == "evalsha") {
          sum.evalsha += n;
        } else if (name != "info" && name != "replconf" && name != "get" && name != "set" && name != "time" &&
                   name != "publish" && name != "spublish") {
          sum.other += n;
        }
        at = colon;
      }
    }
    return sum;
  }

 private:
  std::vector<std::unique_ptr<raw_client>> clients_;
};

void stats_line(const std::string& name, int threads, const std::string& phase,
                const idem::redis_store_statistics& before, const idem::redis_store_statistics& after,
                const command_count& ran_before, const command_count& ran_after, long calls) {
  std::printf("STATS %s %d %s %.4f %llu %llu %llu %llu %llu %.4f %lld\n", name.c_str(), threads, phase.c_str(),
              static_cast<double>(after.round_trips - before.round_trips) / static_cast<double>(calls),
              static_cast<unsigned long long>(after.redirections - before.redirections),
              static_cast<unsigned long long>(after.slot_map_refreshes),
              static_cast<unsigned long long>(after.cluster_retries - before.cluster_retries),
              static_cast<unsigned long long>(after.script_reloads),
              static_cast<unsigned long long>(after.connections_opened),
              static_cast<double>(ran_after.evalsha - ran_before.evalsha) / static_cast<double>(calls),
              ran_after.other - ran_before.other);
  std::fflush(stdout);
}

// Every row for `threads` threads: set up, warmed up, then `repeats` samples of each, the rows in a
// different order each time (a rotation) so that a drifting machine load treats them alike.
void bench(const settings& s, int threads) {
  std::vector<std::unique_ptr<row>> rows;
  auto wanted = [&](const std::string& name) { return s.only.empty() || s.only == name; };
  if (wanted("cluster-raw")) rows.push_back(std::make_unique<raw_row>(s, true, threads));
  if (wanted("cluster-store")) rows.push_back(std::make_unique<store_row>(s, true, threads));
  if (wanted("single-raw")) rows.push_back(std::make_unique<raw_row>(s, false, threads));
  if (wanted("single-store")) rows.push_back(std::make_unique<store_row>(s, false, threads));
  std::vector<address> cluster_masters = learn_slot_map(s.seeds.front()).masters;
  server_counter cluster_servers(cluster_masters);
  server_counter single_server({s.single});
  for (auto& r : rows) {
    if (s.warmup == 0) break;
    r->prepare(run_id(), s.warmup);
    measure(threads, s.warmup, [&](int t, int i) { r->first(t, i); });
    measure(threads, s.warmup, [&](int t, int i) { r->replay(t, i); });
  }
  const long calls = static_cast<long>(threads) * s.calls;
  for (int rep = 0; rep < s.repeats; ++rep) {
    for (std::size_t k = 0; k < rows.size(); ++k) {
      row& r = *rows[(k + static_cast<std::size_t>(rep)) % rows.size()];
      r.prepare(run_id(), s.calls);
      server_counter& servers = r.name().starts_with("cluster") ? cluster_servers : single_server;
      const auto* store = r.store();
      const auto s0 = store ? store->statistics() : idem::redis_store_statistics{};
      const auto c0 = store ? servers.read() : command_count{};
      const sample f = measure(threads, s.calls, [&](int t, int i) { r.first(t, i); });
      const auto s1 = store ? store->statistics() : idem::redis_store_statistics{};
      const auto c1 = store ? servers.read() : command_count{};
      const sample p = measure(threads, s.calls, [&](int t, int i) { r.replay(t, i); });
      report(r.name(), threads, "first", f, rep);
      report(r.name(), threads, "replay", p, rep);
      if (store) {
        const auto s2 = store->statistics();
        const auto c2 = servers.read();
        stats_line(r.name(), threads, "first", s0, s1, c0, c1, calls);
        stats_line(r.name(), threads, "replay", s1, s2, c1, c2, calls);
      }
    }
  }
}

std::vector<address> read_seeds(const std::string& file) {
  std::ifstream in(file);
  std::vector<address> seeds;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) seeds.push_back(parse_address(line));
  }
  if (seeds.empty()) throw std::runtime_error("no seeds in " + file);
  return seeds;
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--cluster") {
      s.seeds = read_seeds(next());
    } else if (arg == "--single") {
      s.single = parse_address(next());
    } else if (arg == "--calls") {
      s.calls = std::stoi(next());
    } else if (arg == "--repeats") {
      s.repeats = std::stoi(next());
    } else if (arg == "--threads") {
      s.threads = std::stoi(next());
    } else if (arg == "--warmup") {
      s.warmup = std::stoi(next());
    } else if (arg == "--only") {
      s.only = next();
    } else {
      throw std::runtime_error("unknown argument " + arg);
    }
  }
  if (s.seeds.empty() || s.single.port == 0)
    throw std::runtime_error("--cluster <seeds file> and --single <host:port> are required");
  if (s.calls < 1 || s.repeats < 1 || s.threads < 1 || s.warmup < 0)
    throw std::runtime_error("bad --calls/--repeats/--threads/--warmup");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const settings s = parse(argc, argv);
    const slot_map map = learn_slot_map(s.seeds.front());
    std::printf(
        "# idem_bench_redis_cluster: %d calls x %d repeats per phase, %d warm-up calls, threads 1 and %d; "
        "single redis at %s; cluster masters:",
        s.calls, s.repeats, s.warmup, s.threads, s.single.text().c_str());
    for (std::size_t m = 0; m < map.masters.size(); ++m) {
      const auto slots = std::count(map.owner.begin(), map.owner.end(), static_cast<int>(m));
      std::printf(" %s (%ld slots)", map.masters[m].text().c_str(), static_cast<long>(slots));
    }
    std::printf("\n");
    for (int threads : {1, s.threads}) bench(s, threads);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem_bench_redis_cluster: %s\n", e.what());
    return 1;
  }
}
