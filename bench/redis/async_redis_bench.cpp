// bench/redis/async_redis_bench.cpp — idem::async_execute on the Redis store with 1, 8, 64 and 256
// calls in flight on one io_context thread, against the floor (the store's own scripts pipelined
// through bare hiredis on one connection with the same number of calls in flight) and against
// engine::execute one call at a time. bench/redis/async_run.sh runs it beside the npm peers driven
// with the same concurrency and prints the side-by-side table. A benchmark, not a test: nothing
// here fails on a number.
//
//   idem_bench_async_redis --address 127.0.0.1:6379 [--calls 4000] [--in-flight 1,8,64,256] [--rows a,b]
//                          [--replays 1]
//
// Every measurement line: RESULT <row> <in flight> <phase> <ops/s> <p50 us> <p99 us> <allocations/call>
// (every thread's: the store's reply thread too; bench/support/allocation_count.hpp), rows
// idem-async (replies read by the store's own thread), idem-async+loop (read on the io_context's thread:
// options.event_loop), idem-sync (in flight 1 only) and hiredis-pipelined; phases first (unique keys) and
// replay (the same keys again; --replays K passes of them, for the instructions of replays alone:
// bench/redis/client_instructions.sh).
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include <idem/asio.hpp>
#include <idem/idem.hpp>
#include <idem/redis_store.hpp>

#include "allocation_count.hpp"
#include "bench_support.hpp"
#include "scripts.hpp"  // runtime/redis: the store's scripts, for the floor

namespace asio = boost::asio;
using idem::bench::clock_type;
using idem::bench::percentile;
using idem::bench::sample;

namespace {

using idem::bench::receipt;

struct settings {
  std::string host = "127.0.0.1";
  int port = 6379;
  int calls = 4000;
  int replays = 1;  // passes of replays over the keys
  std::vector<int> in_flight{1, 8, 64, 256};
  std::string rows = "idem-async,idem-async+loop,idem-sync,hiredis-pipelined";
  bool wants(const std::string& row) const { return ("," + rows + ",").find("," + row + ",") != std::string::npos; }
};

void report(const std::string& row, int in_flight, const std::string& phase, const sample& s) {
  std::printf("RESULT %s %d %s %.0f %.1f %.1f %.1f\n", row.c_str(), in_flight, phase.c_str(), s.ops_per_second,
              s.p50_us, s.p99_us, s.allocations_per_call);
  std::fflush(stdout);
}

// The phase's figures; `allocations_before` is idem::bench::allocations() when it began.
sample summarise(std::vector<double>& latencies, clock_type::duration took, std::uint64_t allocations_before) {
  sample s;
  s.allocations_per_call = idem::bench::allocations_per_call(allocations_before, latencies.size());
  s.ops_per_second = static_cast<double>(latencies.size()) / std::chrono::duration<double>(took).count();
  s.p50_us = percentile(latencies, 0.50);
  s.p99_us = percentile(latencies, 0.99);
  return s;
}

double micros_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t).count();
}

idem::redis_store_options store_options(const settings& s) {
  idem::redis_store_options o;
  o.host = s.host;
  o.port = s.port;
  o.prefix = "bench:async:" + idem::bench::run_id() + ":";
  return o;
}

idem::config quiet() {
  idem::config c;
  c.purge_interval = std::chrono::milliseconds::zero();
  return c;
}

// `keys` through async_execute with `in_flight` coroutines on one io_context thread, each taking
// the next key when its call ends.
sample async_phase(asio::io_context& io, idem::engine& engine, const std::vector<std::string>& keys, int in_flight,
                   long& executions, bool expect_replay) {
  io.restart();
  std::size_t next = 0;
  int running = in_flight;
  clock_type::time_point last_done;
  std::vector<double> latencies;
  latencies.reserve(keys.size());
  auto worker = [&]() -> asio::awaitable<void> {
    while (next < keys.size()) {
      const std::string& key = keys[next++];
      const auto began = clock_type::now();
      auto ctx = engine.make_context("Bench.charge", key);
      auto o = co_await idem::async_execute(
          engine, ctx,
          [&] {
            ++executions;
            return receipt{true, key, 42};
          },
          idem::json_codec{}, asio::use_awaitable);
      if (o.is_replay() != expect_replay || o.value().order_id != key) throw std::runtime_error("wrong answer");
      latencies.push_back(micros_since(began));
    }
    // The phase ends with its last call, not when io.run() returns (the loop's deadline sweep may
    // keep the io_context busy for up to 50 ms more).
    if (--running == 0) last_done = clock_type::now();
  };
  const std::uint64_t allocations = idem::bench::allocations();
  const auto start = clock_type::now();
  for (int i = 0; i < in_flight; ++i) asio::co_spawn(io, worker(), [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run();
  return summarise(latencies, last_done - start, allocations);
}

sample sync_phase(idem::engine& engine, const std::vector<std::string>& keys, long& executions, bool expect_replay) {
  std::vector<double> latencies;
  latencies.reserve(keys.size());
  const std::uint64_t allocations = idem::bench::allocations();
  const auto start = clock_type::now();
  for (const std::string& key : keys) {
    const auto began = clock_type::now();
    auto ctx = engine.make_context("Bench.charge", key);
    auto o = engine.execute<receipt>(
        ctx,
        [&] {
          ++executions;
          return receipt{true, key, 42};
        },
        idem::json_codec{});
    if (o.is_replay() != expect_replay || o.value().order_id != key) throw std::runtime_error("wrong answer");
    latencies.push_back(micros_since(began));
  }
  return summarise(latencies, clock_type::now() - start, allocations);
}

std::vector<std::string> make_keys(int calls, int in_flight) {
  std::vector<std::string> keys;
  const std::string id = idem::bench::run_id();
  for (int i = 0; i < calls; ++i) keys.push_back("order-" + id + "-" + std::to_string(in_flight) + "-" + std::to_string(i));
  return keys;
}

// Rows idem-async (the store's replies read by a thread of its own) and idem-async+loop (read on
// the io_context's thread: options.event_loop).
void bench_engine(const settings& s) {
  for (int in_flight : s.in_flight) {
    for (bool on_loop : {false, true}) {
      asio::io_context io(1);
      idem::redis_store_options options = store_options(s);
      if (on_loop) options.event_loop = std::make_shared<idem::asio::event_loop>(io);
      idem::redis_store store(options);
      idem::engine engine{store, quiet()};
      long executions = 0;
      const std::vector<std::string> keys = make_keys(s.calls, in_flight);
      const std::string row = on_loop ? "idem-async+loop" : "idem-async";
      if (!s.wants(row)) continue;
      report(row, in_flight, "first", async_phase(io, engine, keys, in_flight, executions, false));
      for (int pass = 0; pass < s.replays; ++pass)
        report(row, in_flight, "replay", async_phase(io, engine, keys, in_flight, executions, true));
      if (executions != s.calls) throw std::runtime_error("wrong execution count");
    }
    if (in_flight != 1 || !s.wants("idem-sync")) continue;
    idem::redis_store store(store_options(s));
    idem::engine engine{store, quiet()};
    long executions = 0;
    const std::vector<std::string> sync_keys = make_keys(s.calls, 0);
    report("idem-sync", 1, "first", sync_phase(engine, sync_keys, executions, false));
    report("idem-sync", 1, "replay", sync_phase(engine, sync_keys, executions, true));
  }
}

// The floor: the store's acquire and complete scripts, with the arguments the store sends, on one
// hiredis connection; `in_flight` calls at a time, each a chain of round trips (a first call:
// acquire, then complete once the claim is answered; a replay: acquire), replies read in order.
class pipelined_floor {
 public:
  explicit pipelined_floor(const settings& s) {
    timeval tv{2, 0};
    c_ = redisConnectWithTimeout(s.host.c_str(), s.port, tv);
    if (c_ == nullptr || c_->err != 0) throw std::runtime_error("cannot connect to redis");
    const auto& scripts = idem::detail::redis::scripts();
    for (std::string_view source : {scripts.acquire.source, scripts.complete.source}) {
      auto* r = static_cast<redisReply*>(redisCommand(c_, "SCRIPT LOAD %b", source.data(), source.size()));
      if (r == nullptr || r->type == REDIS_REPLY_ERROR) throw std::runtime_error("SCRIPT LOAD failed");
      freeReplyObject(r);
    }
  }
  ~pipelined_floor() { redisFree(c_); }
  pipelined_floor(const pipelined_floor&) = delete;
  pipelined_floor& operator=(const pipelined_floor&) = delete;

  sample phase(const std::vector<std::string>& keys, const std::vector<std::string>& tokens, int in_flight,
               bool first) {
    struct step {
      std::size_t call;
      bool completing;
      clock_type::time_point began;
    };
    std::deque<step> sent;
    std::vector<double> latencies;
    latencies.reserve(keys.size());
    std::size_t next = 0;
    auto start_call = [&] {
      send_acquire(keys[next], tokens[next]);
      sent.push_back({next++, false, clock_type::now()});
    };
    const std::uint64_t allocations = idem::bench::allocations();
    const auto start = clock_type::now();
    while (next < keys.size() && sent.size() < static_cast<std::size_t>(in_flight)) start_call();
    while (!sent.empty()) {
      void* raw = nullptr;
      if (redisGetReply(c_, &raw) != REDIS_OK || raw == nullptr) throw std::runtime_error("redis read failed");
      auto* reply = static_cast<redisReply*>(raw);
      const std::string_view text(reply->str == nullptr ? "" : reply->str, reply->str == nullptr ? 0 : reply->len);
      const step done = sent.front();
      sent.pop_front();
      bool ended = true;
      if (done.completing) {
        if (!text.starts_with("OK ")) throw std::runtime_error("floor: unexpected answer to complete");
      } else if (first) {
        if (text != "A") throw std::runtime_error("floor: unexpected answer to a first claim");
        send_complete(keys[done.call], tokens[done.call]);
        sent.push_back({done.call, true, done.began});
        ended = false;
      } else if (!text.starts_with("idem/")) {
        throw std::runtime_error("floor: unexpected answer to a replay");
      }
      freeReplyObject(reply);
      if (!ended) continue;
      latencies.push_back(micros_since(done.began));
      if (next < keys.size()) start_call();
    }
    return summarise(latencies, clock_type::now() - start, allocations);
  }

 private:
  void send(std::initializer_list<std::string_view> args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK) {
      throw std::runtime_error("redis write failed");
    }
  }
  // The arguments the store sends for a 30 s lease, a 1 h ttl and the default 1 min retention grace.
  void send_acquire(const std::string& key, const std::string& token) {
    send({"EVALSHA", idem::detail::redis::scripts().acquire.sha, "1", key, token, "30000", "3600000", "-", "3660000",
          "0"});
  }
  void send_complete(const std::string& key, const std::string& token) {
    send({"EVALSHA", idem::detail::redis::scripts().complete.sha, "1", key, token, "3600000", "3660000", payload_,
          channel_, "PUBLISH"});
  }

  redisContext* c_ = nullptr;
  // What encode_payload makes of the engine rows' receipt.
  const std::string payload_ = R"(16:application/json49:{"amount":42,"ok":true,"order_id":"order-xxxxxxxx"}0:)";
  const std::string channel_ = "bench:async-floor:evt:Bench.charge:" + std::string(64, '0');
};

void bench_floor(const settings& s) {
  pipelined_floor floor(s);
  for (int in_flight : s.in_flight) {
    const std::string id = idem::bench::run_id();
    std::vector<std::string> keys, tokens;
    for (int i = 0; i < s.calls; ++i) {
      std::string n = std::to_string(in_flight * 1'000'000 + i);
      keys.push_back("bench:async-floor:rec:Bench.charge:" + id + std::string(54 - n.size(), '0') + n);
      tokens.push_back(std::string(32 - n.size(), '0') + n);
    }
    report("hiredis-pipelined", in_flight, "first", floor.phase(keys, tokens, in_flight, true));
    for (int pass = 0; pass < s.replays; ++pass)
      report("hiredis-pipelined", in_flight, "replay", floor.phase(keys, tokens, in_flight, false));
  }
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--address") {
      s.host = value.substr(0, value.rfind(':'));
      s.port = std::stoi(value.substr(value.rfind(':') + 1));
    } else if (flag == "--calls") {
      s.calls = std::stoi(value);
    } else if (flag == "--replays") {
      s.replays = std::stoi(value);
    } else if (flag == "--rows") {
      s.rows = value;
    } else if (flag == "--in-flight") {
      s.in_flight = parse_list(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  try {
    bench_engine(s);
    if (s.wants("hiredis-pipelined")) bench_floor(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem_bench_async_redis: %s\n", e.what());
    return 1;
  }
  return 0;
}
