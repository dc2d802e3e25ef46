// bench/redis/bench_support.hpp — what the Redis benchmarks share: timing a phase of calls on
// several threads, and a bare hiredis client for the rows without idem. Benchmarks are not tests:
// nothing here asserts a time.
#pragma once

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <idem/lease_token.hpp>

namespace idem::bench {

using clock_type = std::chrono::steady_clock;

// What the benchmarks' guarded function returns, as the npm peers' does: {ok, order id, amount}.
struct receipt {
  bool ok = false;
  std::string order_id;
  long amount = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(receipt, ok, order_id, amount)
};

// One phase's measurement.
struct sample {
  double ops_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  double allocations_per_call = -1;  // every thread's (bench/support/allocation_count.hpp); < 0: not counted
};

inline double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// Runs `call(thread, i)` for i in [0, calls) on each of `threads` threads and measures it: from the
// first thread's start to the last thread's end, and each call's latency.
inline sample measure(int threads, int calls, const std::function<void(int, int)>& call) {
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(threads));
  std::vector<clock_type::time_point> began(static_cast<std::size_t>(threads));
  std::vector<clock_type::time_point> ended(static_cast<std::size_t>(threads));
  std::barrier start(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const auto me = static_cast<std::size_t>(t);
      auto& mine = latencies[me];
      mine.reserve(static_cast<std::size_t>(calls));
      start.arrive_and_wait();
      began[me] = clock_type::now();
      for (int i = 0; i < calls; ++i) {
        const auto before = clock_type::now();
        call(t, i);
        mine.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - before).count());
      }
      ended[me] = clock_type::now();
    });
  }
  for (auto& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(*std::max_element(ended.begin(), ended.end()) -
                                                       *std::min_element(began.begin(), began.end()))
                             .count();
  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  sample s;
  s.ops_per_second = static_cast<double>(threads) * calls / seconds;
  s.p50_us = percentile(all, 0.50);
  s.p99_us = percentile(all, 0.99);
  return s;
}

// A short random name for one run's keys.
inline std::string run_id() { return idem::lease_token::generate().to_string().substr(0, 10); }

// idem::bench::raw_client
//
// One blocking hiredis connection, no library in between.
class raw_client {
 public:
  raw_client(const std::string& host, int port) {
    timeval tv{2, 0};
    c_ = redisConnectWithTimeout(host.c_str(), port, tv);
    if (c_ == nullptr || c_->err != 0) {
      throw std::runtime_error("cannot connect to redis at " + host + ":" + std::to_string(port));
    }
  }
  ~raw_client() { redisFree(c_); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  // SCRIPT LOAD `source`; returns its digest.
  std::string load(std::string_view source) { return command({"SCRIPT", "LOAD", source}); }

  // Runs one command; returns its reply's text ("" when it is not a string). Throws on an error
  // reply (a MOVED included: a row would be measuring a wrong route).
  std::string command(std::initializer_list<std::string_view> args) { return run(args.begin(), args.end()); }
  std::string command(const std::vector<std::string>& args) { return run(args.begin(), args.end()); }

 private:
  template <class It>
  std::string run(It first, It last) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (It a = first; a != last; ++a) {
      argv.push_back(std::string_view(*a).data());
      lens.push_back(std::string_view(*a).size());
    }
    auto* reply = static_cast<redisReply*>(redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (reply == nullptr) throw std::runtime_error("redis command failed");
    const bool failed = reply->type == REDIS_REPLY_ERROR;
    std::string text = reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS || failed
                           ? std::string(reply->str, reply->len)
                           : std::string();
    freeReplyObject(reply);
    if (failed) throw std::runtime_error("redis answered an error: " + text);
    return text;
  }

  redisContext* c_;
};

}  // namespace idem::bench
