// bench/memory/metrics_cost.cpp — a fixed workload for counting instructions (valgrind), so that what
// reporting to idem::metrics costs a memory-store call can be told apart from this machine's timing
// noise (docs/benchmarks.md, "Metrics"):
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null build/bench/idem_bench_metrics_cost MODE CALLS ROUNDS
//
// MODE plain (an engine), metrics (an engine reporting to idem::metrics), static (an engine whose
// contexts name a kept idem::static_scope, as generated wrappers do, instead of a std::string) or
// bare (the bench's baseline, a mutex and an unordered_map, idem_bench_memory's bare_map) or none (the
// setup only, to subtract); ROUNDS 1 runs CALLS first calls, 2 also replays them.
// Differences of the totals divided by CALLS are instructions per first call and per replay; under
// `valgrind --tool=cachegrind --cache-sim=yes`, the data cache misses per call, which decide the wall
// time once the records outgrow the caches and which this machine's timing cannot resolve.
#include <idem/idem.hpp>

#include "bare_map.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: idem_bench_metrics_cost plain|metrics|static|bare|none CALLS ROUNDS\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int calls = std::atoi(argv[2]);
  const int rounds = std::atoi(argv[3]);
  std::vector<std::string> keys;
  for (int i = 0; i < calls; ++i) keys.push_back("order-" + std::to_string(1000000 + i));
  idem::memory_store store;
  idem::engine_hooks hooks;
  if (mode == "metrics") hooks.metrics = std::make_shared<idem::metrics>();
  idem::engine engine(store, {}, std::move(hooks));
  const idem::static_scope kept_scope("OrderConsumer.on");
  if (mode == "none") return 0;  // the setup alone, to subtract
  if (mode == "bare") {  // idem_bench_memory's baseline: a first call inserts, a replay finds
    const std::string scope = "OrderConsumer.on";
    idem_bench::bare_map map;
    for (int round = 0; round < rounds; ++round)
      for (const std::string& key : keys)
        if (!(round == 0 ? map.first_call(scope, key) : map.replay(scope, key))) std::abort();
    return 0;
  }
  const bool kept = mode == "static";
  for (int round = 0; round < rounds; ++round)
    for (const std::string& key : keys) {
      if (kept)
        (void)engine.execute(engine.make_context(kept_scope, key), [] {});
      else
        (void)engine.execute(engine.make_context("OrderConsumer.on", key), [] {});
    }
  return 0;
}
