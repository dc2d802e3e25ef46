// bench/memory/bare_map.hpp — the memory benchmarks' baseline, one definition for the wall-clock
// bench (idem_bench_memory) and the instruction and cache-miss counts (idem_bench_metrics_cost).
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

namespace idem_bench {

// What an application would write by hand with no idempotency library: one mutex, one map,
// `try_emplace(scope + ":" + key)` for a first call and `find` for a replay.
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

}  // namespace idem_bench
