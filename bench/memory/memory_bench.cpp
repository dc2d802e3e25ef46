// bench/memory — the engine over the memory store against a bare std::mutex + std::unordered_map,
// measured in the same run: first calls (unique keys), replays (the same keys again), 1 and 2
// threads; the wake-up latency of a blocked duplicate; bytes of memory per stored record.
//
// Run: build/bench/idem_bench_memory [operations-per-thread]
#include <malloc.h>

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

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

std::vector<std::string> make_keys(std::size_t count, int thread) {
  std::vector<std::string> keys;
  keys.reserve(count);
  for (std::size_t i = 0; i < count; ++i) keys.push_back("order-" + std::to_string(thread) + "-" + std::to_string(i));
  return keys;
}

// The baseline: what an application would write by hand with no idempotency library.
struct bare_map {
  std::mutex mutex;
  std::unordered_map<std::string, std::string> records;

  bool first_call(const std::string& scope, const std::string& key) {
    std::lock_guard lock(mutex);
    return records.try_emplace(scope + ":" + key, std::string()).second;
  }
  bool replay(const std::string& scope, const std::string& key) {
    std::lock_guard lock(mutex);
    return records.find(scope + ":" + key) != records.end();
  }
};

// Runs `op(thread, i)` for `per_thread` operations on each of `threads` threads; returns ns/op
// (wall time over all operations).
template <class Op>
double measure(int threads, std::size_t per_thread, Op op) {
  std::barrier start(threads + 1);
  std::vector<std::jthread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      for (std::size_t i = 0; i < per_thread; ++i) op(t, i);
    });
  start.arrive_and_wait();
  const auto begin = clock_type::now();
  workers.clear();  // joins
  const auto elapsed = std::chrono::duration<double, std::nano>(clock_type::now() - begin).count();
  return elapsed / static_cast<double>(per_thread * static_cast<std::size_t>(threads));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct pair_result {
  double bare_first, engine_first, bare_replay, engine_replay;
};

pair_result run_round(int threads, std::size_t per_thread) {
  std::vector<std::vector<std::string>> keys;
  for (int t = 0; t < threads; ++t) keys.push_back(make_keys(per_thread, t));
  const std::string scope = "OrderConsumer.on";
  pair_result r{};
  {
    bare_map map;
    r.bare_first = measure(threads, per_thread, [&](int t, std::size_t i) {
      if (!map.first_call(scope, keys[t][i])) std::abort();
    });
    r.bare_replay = measure(threads, per_thread, [&](int t, std::size_t i) {
      if (!map.replay(scope, keys[t][i])) std::abort();
    });
  }
  {
    idem::memory_store store;
    idem::engine engine(store);
    r.engine_first = measure(threads, per_thread, [&](int t, std::size_t i) {
      auto o = engine.execute(engine.make_context(scope, keys[t][i]), [] {});
      if (!std::holds_alternative<idem::executed<void>>(o)) std::abort();
    });
    r.engine_replay = measure(threads, per_thread, [&](int t, std::size_t i) {
      auto o = engine.execute(engine.make_context(scope, keys[t][i]), [] {});
      if (!std::holds_alternative<idem::replayed<void>>(o)) std::abort();
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
  const std::size_t per_thread = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200'000;
  std::printf("idem memory benchmark: %zu operations per thread, median of 5 rounds, ns per call\n\n", per_thread);
  std::printf("%-8s %-12s %12s %12s %8s\n", "threads", "workload", "bare map", "idem", "ratio");
  for (int threads : {1, 2}) {
    std::vector<double> bf, ef, br, er;
    for (int round = 0; round < 5; ++round) {
      const auto r = run_round(threads, per_thread);
      bf.push_back(r.bare_first);
      ef.push_back(r.engine_first);
      br.push_back(r.bare_replay);
      er.push_back(r.engine_replay);
    }
    std::printf("%-8d %-12s %12.0f %12.0f %7.2fx\n", threads, "first call", median(bf), median(ef), median(ef) / median(bf));
    std::printf("%-8d %-12s %12.0f %12.0f %7.2fx\n", threads, "replay", median(br), median(er), median(er) / median(br));
  }

  const auto wake = wake_up_latencies(2000);
  std::printf("\nwake-up of a blocked duplicate after the holder completes (2000 rounds): p50 %.1f us, p99 %.1f us, max %.1f us\n",
              wake[wake.size() / 2], wake[wake.size() * 99 / 100], wake.back());

  const std::size_t n = 100'000;
  std::printf("memory per stored record (%zu records, 22-byte keys, heap in use): idem %.0f B, bare map %.0f B\n", n,
              bytes_per_record_engine(n), bytes_per_record_bare(n));
  return 0;
}
