// bench/memory — the engine over the memory store against a bare std::mutex + std::unordered_map,
// measured in the same run: first calls (unique keys) and replays (the same keys again) with 100,000
// and 200,000 calls per thread, 1 and 2 threads; the voluntary context switches of each phase
// (getrusage: every thread of the process, the engine's heartbeat and timers included) per 1,000
// calls (the engine's contexts made as a generated wrapper makes them, under a kept idem::static_scope);
// the store's own calls without the engine (make_context, try_acquire, complete), to show
// what the engine adds; the engine reporting to an idem::metrics (its cost: at most 5 % is allowed); the wake-up latency of a blocked duplicate; bytes of memory per stored record.
//
// Run: build/bench/idem_bench_memory [rounds [threads [calls-per-thread]]]
//   rounds: default 5, medians over the rounds; threads (1 or 2) and calls: only that row, e.g. for perf.
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <idem/idem.hpp>

#include "bare_map.hpp"

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

std::vector<std::string> make_keys(std::size_t count, int thread) {
  std::vector<std::string> keys;
  keys.reserve(count);
  for (std::size_t i = 0; i < count; ++i) keys.push_back("order-" + std::to_string(thread) + "-" + std::to_string(i));
  return keys;
}

using idem_bench::bare_map;

long voluntary_switches() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_nvcsw;
}

struct phase_result {
  double ns_per_call;
  double switches_per_1000;  // voluntary context switches of the whole process
};

// Runs `op(thread, i)` for `per_thread` operations on each of `threads` threads; returns ns/op
// (wall time over all operations) and the process's voluntary context switches per 1,000 calls
// (the threads' start and the barrier count too: `threads` + 1 switches a phase at most).
template <class Op>
phase_result measure(int threads, std::size_t per_thread, Op op) {
  std::barrier start(threads + 1);
  std::vector<std::jthread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      for (std::size_t i = 0; i < per_thread; ++i) op(t, i);
    });
  const long switches_before = voluntary_switches();
  start.arrive_and_wait();
  const auto begin = clock_type::now();
  workers.clear();  // joins
  const auto elapsed = std::chrono::duration<double, std::nano>(clock_type::now() - begin).count();
  const double calls = static_cast<double>(per_thread * static_cast<std::size_t>(threads));
  return {elapsed / calls, static_cast<double>(voluntary_switches() - switches_before) * 1000.0 / calls};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct round_result {
  phase_result bare_first, engine_first, bare_replay, engine_replay;
  phase_result store_first, store_replay;  // the store's own calls, no engine: what the engine adds
  phase_result metrics_first, metrics_replay;  // the engine reporting to an idem::metrics
};

round_result run_round(int threads, std::size_t per_thread, int round) {
  std::vector<std::vector<std::string>> keys;
  for (int t = 0; t < threads; ++t) keys.push_back(make_keys(per_thread, t));
  const std::string scope = "OrderConsumer.on";
  round_result r{};
  {
    bare_map map;
    r.bare_first = measure(threads, per_thread, [&](int t, std::size_t i) {
      if (!map.first_call(scope, keys[t][i])) std::abort();
    });
    r.bare_replay = measure(threads, per_thread, [&](int t, std::size_t i) {
      if (!map.replay(scope, keys[t][i])) std::abort();
    });
  }
  // First calls, then their replays, through an engine with `hooks` on a fresh memory store.
  // The engine's calls name their scope as a generated wrapper does: kept once (idem::static_scope).
  const idem::static_scope kept_scope(scope);
  auto engine_rows = [&](idem::engine_hooks hooks, phase_result& first, phase_result& replay) {
    idem::memory_store store;
    idem::engine engine(store, {}, std::move(hooks));
    first = measure(threads, per_thread, [&](int t, std::size_t i) {
      auto o = engine.execute(engine.make_context(kept_scope, keys[t][i]), [] {});
      if (!std::holds_alternative<idem::executed<void>>(o)) std::abort();
    });
    replay = measure(threads, per_thread, [&](int t, std::size_t i) {
      auto o = engine.execute(engine.make_context(kept_scope, keys[t][i]), [] {});
      if (!std::holds_alternative<idem::replayed<void>>(o)) std::abort();
    });
  };
  auto plain_engine = [&] { engine_rows({}, r.engine_first, r.engine_replay); };
  auto engine_with_metrics = [&] {
    engine_rows({.metrics = std::make_shared<idem::metrics>()}, r.metrics_first, r.metrics_replay);
  };
  // Alternated by round, so that neither runs on the heap the other left behind every time.
  if (round % 2 == 0) {
    plain_engine();
    engine_with_metrics();
  } else {
    engine_with_metrics();
    plain_engine();
  }
  {
    idem::memory_store store;
    const idem::engine contexts(store);  // only builds the contexts, as the engine rows do
    r.store_first = measure(threads, per_thread, [&](int t, std::size_t i) {
      const idem::context ctx = contexts.make_context(kept_scope, keys[t][i]);
      const auto claim = store.try_acquire(ctx);
      if (!std::holds_alternative<idem::acquired>(claim)) std::abort();
      store.complete(ctx.id, std::get<idem::acquired>(claim).token, idem::payload::none(), ctx.ttl);
    });
    r.store_replay = measure(threads, per_thread, [&](int t, std::size_t i) {
      if (!std::holds_alternative<idem::duplicate>(store.try_acquire(contexts.make_context(kept_scope, keys[t][i]))))
        std::abort();
    });
  }
  return r;
}

// Holder acquires; a waiter blocks in try_acquire; the holder completes and stamps the time; the
// waiter stamps the time it returns. Returns the latencies in microseconds.
std::vector<double> wake_up_latencies(int rounds) {
  idem::memory_store store;
  std::vector<double> micros;
  micros.reserve(static_cast<std::size_t>(rounds));
  for (int i = 0; i < rounds; ++i) {
    const idem::context ctx{.id = idem::identity("Wake.up", "k" + std::to_string(i)), .wait = 5s};
    const auto token = std::get<idem::acquired>(store.try_acquire(ctx)).token;
    std::atomic<bool> waiting = false;
    clock_type::time_point returned;
    std::jthread waiter([&] {
      waiting = true;
      auto r = store.try_acquire(ctx);
      returned = clock_type::now();
      if (!std::holds_alternative<idem::duplicate>(r)) std::abort();
    });
    while (!waiting) std::this_thread::yield();
    std::this_thread::sleep_for(200us);  // let the waiter block inside the store
    const auto completed = clock_type::now();
    store.complete(ctx.id, token, idem::payload::none(), 1h);
    waiter.join();
    micros.push_back(std::chrono::duration<double, std::micro>(returned - completed).count());
  }
  std::sort(micros.begin(), micros.end());
  return micros;
}

std::size_t heap_in_use() { return mallinfo2().uordblks; }

double bytes_per_record_engine(std::size_t count) {
  const auto keys = make_keys(count, 0);
  idem::memory_store store;
  idem::engine engine(store);
  const std::size_t before = heap_in_use();
  for (const auto& key : keys) (void)engine.execute(engine.make_context("OrderConsumer.on", key), [] {});
  return static_cast<double>(heap_in_use() - before) / static_cast<double>(count);
}

double bytes_per_record_bare(std::size_t count) {
  const auto keys = make_keys(count, 0);
  bare_map map;
  const std::size_t before = heap_in_use();
  for (const auto& key : keys) map.first_call("OrderConsumer.on", key);
  return static_cast<double>(heap_in_use() - before) / static_cast<double>(count);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const int only_threads = argc > 2 ? std::atoi(argv[2]) : 0;
  const std::size_t only_calls = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
  std::printf("idem memory benchmark: median of %d rounds; ns per call; voluntary context switches of the process per "
              "1,000 calls\n\n",
              rounds);
  std::printf("| calls per thread | threads | workload | bare map ns | idem ns | idem / bare | bare switches | idem "
              "switches | store alone ns | idem + metrics ns | metrics cost (median of rounds) |\n");
  std::printf("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (std::size_t per_thread : {std::size_t{100'000}, std::size_t{200'000}}) {
    if (only_calls != 0 && per_thread != only_calls) continue;
    for (int threads : {1, 2}) {
      if (only_threads != 0 && threads != only_threads) continue;
      std::vector<round_result> results;
      for (int round = 0; round < rounds; ++round) results.push_back(run_round(threads, per_thread, round));
      using phase = phase_result round_result::*;
      auto row = [&](const char* workload, phase bare, phase idem, phase store, phase with_metrics) {
        std::vector<double> bare_ns, idem_ns, bare_sw, idem_sw, store_ns, metrics_ns, metrics_ratio;
        for (const round_result& r : results) {
          bare_ns.push_back((r.*bare).ns_per_call);
          idem_ns.push_back((r.*idem).ns_per_call);
          bare_sw.push_back((r.*bare).switches_per_1000);
          idem_sw.push_back((r.*idem).switches_per_1000);
          store_ns.push_back((r.*store).ns_per_call);
          metrics_ns.push_back((r.*with_metrics).ns_per_call);
          // Paired within a round: the machine's drift between rounds cancels out.
          metrics_ratio.push_back((r.*with_metrics).ns_per_call / (r.*idem).ns_per_call);
        }
        std::printf("| %zu | %d | %s | %.0f | %.0f | %.2fx | %.2f | %.2f | %.0f | %.0f | %+.1f%% |\n", per_thread, threads,
                    workload, median(bare_ns), median(idem_ns), median(idem_ns) / median(bare_ns), median(bare_sw),
                    median(idem_sw), median(store_ns), median(metrics_ns),
                    (median(metrics_ratio) - 1) * 100);
      };
      row("first call", &round_result::bare_first, &round_result::engine_first, &round_result::store_first,
          &round_result::metrics_first);
      row("replay", &round_result::bare_replay, &round_result::engine_replay, &round_result::store_replay,
          &round_result::metrics_replay);
      std::fflush(stdout);
    }
  }

  if (only_threads != 0 || only_calls != 0) return 0;
  const auto wake = wake_up_latencies(2000);
  std::printf("\nwake-up of a blocked duplicate after the holder completes (2000 rounds): p50 %.1f us, p99 %.1f us, max %.1f us\n",
              wake[wake.size() / 2], wake[wake.size() * 99 / 100], wake.back());

  const std::size_t n = 100'000;
  std::printf("memory per stored record (%zu records, 22-byte keys, heap in use): idem %.0f B, bare map %.0f B\n", n,
              bytes_per_record_engine(n), bytes_per_record_bare(n));
  return 0;
}
