// tests/redis/redis_failure_test.cpp — a Redis that is down, hangs or restarts.
#include <chrono>
#include <string>
#include <thread>
#include <variant>

#include <catch2/catch.hpp>

#include <idem/errors.hpp>
#include <idem/redis_store.hpp>

#include <idem/testing/store_contract.hpp>
#include "redis_support.hpp"

namespace {

using namespace std::chrono_literals;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::sample_payload;
using idem::contract::stopwatch;
using idem::contract::unique_key;
using idem::redis_test::make_context;
using idem::redis_test::private_server;
using idem::redis_test::test_options;

idem::identity make_id(std::string_view hint) { return idem::identity("RedisFailureTest.action", unique_key(hint)); }

// Requires `call` to throw store_unavailable_error naming `operation` and the record, never its key.
void require_unavailable(std::string_view operation, const idem::identity& id, const std::function<void()>& call) {
  std::string message;
  std::string error_operation;
  std::string error_record;
  try {
    call();
    FAIL("expected store_unavailable_error from " << operation);
  } catch (const idem::store_unavailable_error& e) {
    message = e.what();
    error_operation = e.operation();
    error_record = e.record();
  }
  INFO(message);
  CHECK(error_operation == operation);  // as data, not only in the text
  CHECK(error_record == id.to_string());
  CHECK(message.find(operation) != std::string::npos);
  CHECK(message.find(id.to_string()) != std::string::npos);
  CHECK(message.find(id.key()) == std::string::npos);
}

}  // namespace

TEST_CASE("nothing listening: every operation is store_unavailable_error, quickly") {
  private_server server;
  const auto where = server.where();
  server.stop();
  idem::redis_store store(test_options(where));
  const auto id = make_id("refused");
  const auto token = idem::lease_token::generate();
  stopwatch clock;
  require_unavailable("try_acquire", id, [&] { (void)store.try_acquire(make_context(id)); });
  require_unavailable("try_acquire", id, [&] { (void)store.try_acquire(make_context(id, 5s)); });
  require_unavailable("complete", id, [&] { store.complete(id, token, sample_payload(), 1h); });
  require_unavailable("release", id, [&] { store.release(id, token); });
  require_unavailable("extend", id, [&] { (void)store.extend(id, token, 1s); });
  CHECK_THROWS_AS(store.purge_expired(), idem::store_unavailable_error);
  CHECK(clock.elapsed() < 5s);  // connection refused is immediate: no waiting for timeouts
}

TEST_CASE("Redis restarted mid-run: unavailable while down, the store recovers by itself") {
  private_server server;
  auto options = test_options(server.where());
  options.pool_size = 4;
  idem::redis_store store(options);

  // Warm the pool with several connections, so that stale ones exist after the restart.
  std::vector<std::thread> warm;
  for (int i = 0; i < 4; ++i) {
    warm.emplace_back([&, i] {
      const auto id = make_id("warm-" + std::to_string(i));
      auto r = store.try_acquire(make_context(id));
      if (auto* a = std::get_if<idem::acquired>(&r)) store.complete(id, a->token, sample_payload(), 1h);
    });
  }
  for (auto& t : warm) t.join();

  const auto before = make_id("before");
  auto token = require_acquired(store.try_acquire(make_context(before)));
  server.stop();
  require_unavailable("complete", before, [&] { store.complete(before, token, sample_payload(), 1h); });
  const auto during = make_id("during");
  require_unavailable("try_acquire", during, [&] { (void)store.try_acquire(make_context(during)); });

  server.start();
  // Back: the very next call works (stale pooled connections are noticed without a round trip).
  const auto after = make_id("after");
  auto token2 = require_acquired(store.try_acquire(make_context(after)));
  store.complete(after, token2, sample_payload("after restart"), 1h);
  CHECK(require_duplicate(store.try_acquire(make_context(after))).value == sample_payload("after restart"));
  // The server lost everything (nothing is persisted): the old holder's completion is lease_lost.
  CHECK_THROWS_AS(store.complete(before, token, sample_payload(), 1h), idem::lease_lost_error);
}

TEST_CASE("a Redis that hangs is store_unavailable_error after the command timeout") {
  private_server server;
  auto options = test_options(server.where());
  options.command_timeout = 200ms;
  idem::redis_store store(options);
  idem::redis_test::raw_redis redis(server.where());
  const auto id = make_id("hang");
  require_acquired(store.try_acquire(make_context(make_id("warm"))));

  // CLIENT PAUSE stops Redis from answering clients for the given time, like a stalled server.
  REQUIRE(redis.text({"CLIENT", "PAUSE", "1500"}) == "OK");
  stopwatch clock;
  require_unavailable("try_acquire", id, [&] { (void)store.try_acquire(make_context(id)); });
  CHECK(clock.elapsed() < 1500ms);
  // After the pause the store works again.
  std::this_thread::sleep_for(1600ms - clock.elapsed());
  require_acquired(store.try_acquire(make_context(id)));
}

TEST_CASE("with a connected replica, required acknowledgements succeed") {
  private_server primary;
  private_server replica;
  idem::redis_test::raw_redis replica_admin(replica.where());
  idem::redis_test::raw_redis primary_admin(primary.where());
  // Start the initial sync at once instead of after the default 5 s grace for more replicas.
  REQUIRE(primary_admin.text({"CONFIG", "SET", "repl-diskless-sync-delay", "0"}) == "OK");
  REQUIRE(replica_admin.text({"REPLICAOF", "127.0.0.1", std::to_string(primary.where().port)}) == "OK");
  // Redis offers no event for "the replica is in sync"; look every 10 ms, for at most 10 s.
  bool online = false;
  for (int i = 0; i < 1000 && !online; ++i) {
    online = primary_admin.text({"INFO", "replication"}).find("state=online") != std::string::npos;
    if (!online) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(online);

  auto options = test_options(primary.where());
  options.replica_ack = {.replicas = 1, .timeout = 1s};
  idem::redis_store store(options);
  const auto id = make_id("replicated");
  auto token = require_acquired(store.try_acquire(make_context(id)));
  CHECK(store.extend(id, token, 30s));
  store.complete(id, token, sample_payload("replicated"), 1h);
  CHECK(require_duplicate(store.try_acquire(make_context(id))).value == sample_payload("replicated"));
  // The replica holds the record too.
  CHECK(replica_admin.text({"GET", store.record_key(id)}).starts_with("idem/2 c "));
}
