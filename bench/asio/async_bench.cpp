// bench/asio — idem::async_execute against engine::execute on the same store, in the same run:
// first calls (unique keys) and replays (the same keys again); the blocking calls one after the
// other on one thread, the asynchronous ones with 1, 8, 64 and 256 coroutines in flight on one
// io_context thread. Prints ns per call, the ratio sync / async (above 1: the asynchronous
// calls get through more per second) and the allocations per call of each side (every thread's,
// bench/support/allocation_count.hpp). bench/asio/run.sh starts a redis-server for the Redis rows.
//
// Run: build/bench/idem_bench_async memory|redis:HOST:PORT [calls-per-round] [rounds] [sync|async [in-flight]]
// The last two run one side only (and one concurrency), for counting instructions per call:
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null idem_bench_async memory 10000 1 async 64
// minus the same with 5000, divided by 2 x 5000 (a round makes first calls and replays).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <idem/asio.hpp>
#include <idem/idem.hpp>
#if IDEM_BENCH_WITH_REDIS
#include <idem/redis_store.hpp>
#endif

#include "allocation_count.hpp"

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

// One round of one side: its time and its allocations, per call.
struct per_call {
  double ns = 0;
  double allocations = 0;
};

per_call measured(clock_type::time_point start, std::uint64_t allocations_before, std::size_t calls) {
  const auto took = clock_type::now() - start;
  return {std::chrono::duration<double, std::nano>(took).count() / static_cast<double>(calls),
          idem::bench::allocations_per_call(allocations_before, calls)};
}

std::vector<std::string> make_keys(std::size_t count, int round) {
  std::vector<std::string> keys;
  keys.reserve(count);
  for (std::size_t i = 0; i < count; ++i) keys.push_back("order-" + std::to_string(round) + "-" + std::to_string(i));
  return keys;
}

idem::config quiet() {
  idem::config c;
  c.purge_interval = std::chrono::milliseconds::zero();
  return c;
}

// engine::execute over `keys`, one after the other.
per_call sync_round(idem::engine& engine, const std::vector<std::string>& keys) {
  long sum = 0;
  const std::uint64_t allocations = idem::bench::allocations();
  const auto start = clock_type::now();
  for (const std::string& key : keys) {
    auto ctx = engine.make_context("Bench.sync", key);
    sum += engine.execute(ctx, [] { return 1L; }, idem::json_codec{}).value();
  }
  const per_call result = measured(start, allocations, keys.size());
  if (sum != static_cast<long>(keys.size())) std::abort();
  return result;
}

// async_execute over `keys` with `in_flight` coroutines on one io_context thread, each taking
// the next key when its call ends.
per_call async_round(idem::engine& engine, const std::vector<std::string>& keys, int in_flight) {
  asio::io_context io(1);
  std::size_t next = 0;
  long sum = 0;
  auto worker = [&]() -> asio::awaitable<void> {
    while (next < keys.size()) {
      const std::string& key = keys[next++];
      auto ctx = engine.make_context("Bench.async", key);
      auto o = co_await idem::async_execute(engine, ctx, [] { return 1L; }, idem::json_codec{}, asio::use_awaitable);
      sum += o.value();
    }
  };
  // Counted from before the coroutines start: their frames are allocations of the call too (one per
  // coroutine, not per call, at 1-256 in flight over thousands of calls).
  const std::uint64_t allocations = idem::bench::allocations();
  const auto start = clock_type::now();
  for (int i = 0; i < in_flight; ++i) asio::co_spawn(io, worker(), asio::detached);
  io.run();
  const per_call result = measured(start, allocations, keys.size());
  if (sum != static_cast<long>(keys.size())) std::abort();
  return result;
}

// The store named on the command line, under a prefix of this round (Redis).
std::unique_ptr<idem::store> make_store(const std::string& spec, int round) {
  if (spec == "memory") return std::make_unique<idem::memory_store>();
#if IDEM_BENCH_WITH_REDIS
  if (spec.starts_with("redis:")) {
    const std::string address = spec.substr(6);
    idem::redis_store_options o;
    o.host = address.substr(0, address.rfind(':'));
    o.port = std::stoi(address.substr(address.rfind(':') + 1));
    o.prefix = "idem-bench-async:" + std::to_string(::getpid()) + ":" + std::to_string(round) + ":";
    return std::make_unique<idem::redis_store>(o);
  }
#endif
  throw std::invalid_argument("unknown store '" + spec + "': memory or redis:HOST:PORT");
}

// The median round by time (its allocations with it: they hardly vary from round to round).
per_call median(std::vector<per_call> v) {
  std::sort(v.begin(), v.end(), [](const per_call& a, const per_call& b) { return a.ns < b.ns; });
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string spec = argc > 1 ? argv[1] : "memory";
  const std::size_t calls = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 50000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  const std::string side = argc > 4 ? argv[4] : "both";
  const bool run_sync = side != "async", run_async = side != "sync";
  std::vector<int> concurrencies = {1, 8, 64, 256};
  if (argc > 5) concurrencies = {std::atoi(argv[5])};
  std::printf("idem_bench_async %s: %zu calls per round, median of %d rounds, one client thread\n\n", spec.c_str(),
              calls, rounds);
  std::printf("| store | calls | in flight | engine::execute ns/call | async_execute ns/call | sync / async "
              "| execute allocations/call | async allocations/call |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (int in_flight : concurrencies) {
    std::vector<per_call> sync_first, sync_replay, async_first, async_replay;
    for (int round = 0; round < rounds; ++round) {
      const std::unique_ptr<idem::store> store = make_store(spec, in_flight * 1000 + round);
      idem::engine engine{*store, quiet()};
      const std::vector<std::string> keys = make_keys(calls, round);
      sync_first.push_back(run_sync ? sync_round(engine, keys) : per_call{});
      sync_replay.push_back(run_sync ? sync_round(engine, keys) : per_call{});
      async_first.push_back(run_async ? async_round(engine, keys, in_flight) : per_call{});
      async_replay.push_back(run_async ? async_round(engine, keys, in_flight) : per_call{});
    }
    const std::string store = spec.substr(0, spec.find(':'));
    auto row = [&](const char* phase, const per_call& sync, const per_call& async) {
      std::printf("| %s | %s | %d | %.0f | %.0f | %.2fx | %.1f | %.1f |\n", store.c_str(), phase, in_flight, sync.ns,
                  async.ns, sync.ns / async.ns, sync.allocations, async.allocations);
    };
    row("first", median(sync_first), median(async_first));
    row("replay", median(sync_replay), median(async_replay));
  }
  return 0;
}
