// tests/redis/redis_pipeline_test.cpp — many threads on one multiplexed connection (pool_size = 1):
// every caller gets its own replies, and a connection that fails fails every call pipelined on it.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include <idem/errors.hpp>
#include <idem/redis_store.hpp>

#include <idem/testing/store_contract.hpp>
#include "redis_support.hpp"

namespace {

using namespace std::chrono_literals;
using idem::contract::require_acquired;
using idem::contract::sample_payload;
using idem::contract::stopwatch;
using idem::contract::unique_key;
using idem::redis_test::fixture_address;
using idem::redis_test::make_context;
using idem::redis_test::private_server;
using idem::redis_test::raw_redis;
using idem::redis_test::test_options;
using idem::redis_test::unique_prefix;

idem::identity make_id(std::string_view hint) { return idem::identity("RedisPipelineTest.action", unique_key(hint)); }

}  // namespace

TEST_CASE("one connection carries many threads' calls and hands each caller its own replies") {
  auto options = test_options(fixture_address(), unique_prefix("pipeline"));
  options.pool_size = 1;
  idem::redis_store store(options);
  constexpr int threads = 8;
  constexpr int per_thread = 150;
  std::atomic<int> wrong{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        // Each call's body names its caller: a reply handed to the wrong caller shows as a mismatch.
        const std::string mine = std::to_string(t) + "/" + std::to_string(i);
        try {
          const auto id = make_id("pipeline-" + mine);
          auto first = store.try_acquire(make_context(id));
          auto* claimed = std::get_if<idem::acquired>(&first);
          if (claimed == nullptr) {
            ++wrong;
            continue;
          }
          store.complete(id, claimed->token, sample_payload(mine), 1h);
          auto again = store.try_acquire(make_context(id));
          auto* replayed = std::get_if<idem::duplicate>(&again);
          if (replayed == nullptr || replayed->value.body != mine) ++wrong;
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  CHECK(wrong == 0);
  CHECK(errors == 0);
  // One connection (one per master in a cluster: pool_size counts per server).
  CHECK(store.statistics().connections_opened == (idem::redis_test::on_cluster() ? 3u : 1u));
  const auto stats = store.statistics();
  CHECK(stats.round_trips - stats.script_reloads == std::uint64_t{threads} * per_thread * 3);
}

TEST_CASE("a stalled shared connection fails every call on it, none of them claims later, and the next call reconnects", "[standalone]") {
  private_server server;
  auto options = test_options(server.where());
  options.pool_size = 1;
  options.command_timeout = 300ms;
  idem::redis_store store(options);
  raw_redis admin(server.where());
  require_acquired(store.try_acquire(make_context(make_id("warm"))));
  REQUIRE(store.statistics().connections_opened == 1);

  // CLIENT PAUSE WRITE holds every script (and lets this connection's UNPAUSE through), like a
  // stalled server; all four calls pipeline on the store's one connection and time out together.
  REQUIRE(admin.text({"CLIENT", "PAUSE", "10000", "WRITE"}) == "OK");
  constexpr int callers = 4;
  std::vector<idem::identity> ids;
  for (int i = 0; i < callers; ++i) ids.push_back(make_id("stalled-" + std::to_string(i)));
  std::atomic<int> unavailable{0};
  stopwatch clock;
  std::vector<std::thread> workers;
  for (int i = 0; i < callers; ++i) {
    workers.emplace_back([&, i] {
      try {
        (void)store.try_acquire(make_context(ids[static_cast<std::size_t>(i)]));
      } catch (const idem::store_unavailable_error&) {
        ++unavailable;
      }
    });
  }
  for (auto& w : workers) w.join();
  CHECK(unavailable == callers);
  CHECK(clock.elapsed() < 5s);  // the command timeout, not the pause
  REQUIRE(admin.text({"CLIENT", "UNPAUSE"}) == "OK");

  // The store closed the connection when it failed, so Redis dropped the held scripts instead of
  // running them after the pause: every key is still free.
  for (const auto& id : ids) require_acquired(store.try_acquire(make_context(id)));
  CHECK(store.statistics().connections_opened >= 2);
}

TEST_CASE("a command is written in RESP exactly, its arguments held inline or, past them, on the heap") {
  namespace rd = idem::detail::redis;
  rd::command small;
  small.arg("GET").arg("").arg(std::string_view("a\0b", 3));
  std::string wire = "+";  // append_to appends after what the buffer holds
  small.append_to(wire);
  using namespace std::string_literals;
  CHECK(wire == "+*3\r\n$3\r\nGET\r\n$0\r\n\r\n$3\r\na\0b\r\n"s);

  // One argument past the inline ones moves them all: argv, lengths and the wire keep their order.
  std::vector<std::string> args;
  for (std::size_t i = 0; i <= rd::command::inline_arguments + 3; ++i) args.push_back("arg-" + std::to_string(i));
  rd::command large;
  for (const std::string& a : args) large.arg(a);
  REQUIRE(large.argc() == static_cast<int>(args.size()));
  std::string expected = "*" + std::to_string(args.size()) + "\r\n";
  for (std::size_t i = 0; i < args.size(); ++i) {
    CHECK(std::string_view(large.argv()[i], large.lengths()[i]) == args[i]);
    expected += "$" + std::to_string(args[i].size()) + "\r\n" + args[i] + "\r\n";
  }
  std::string large_wire;
  large.append_to(large_wire);
  CHECK(large_wire == expected);
}
