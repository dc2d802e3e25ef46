// tests/redis/redis_wait_test.cpp — a duplicate waits on pub/sub, not by polling.
//
// Most cases set fallback_recheck to an hour and give the holder a long lease: then the only way a
// waiter can return early is the message the complete or release script publishes.
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
using idem::contract::background;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::require_in_flight;
using idem::contract::sample_payload;
using idem::contract::stopwatch;
using idem::contract::unique_key;
using idem::redis_test::fixture_address;
using idem::redis_test::raw_redis;
using idem::redis_test::test_options;

idem::context make_context(const idem::identity& id, std::chrono::milliseconds lease, std::chrono::milliseconds wait) {
  idem::context ctx{.id = id, .ttl = 1h, .lease = lease, .wait = wait};
  ctx.validate();
  return ctx;
}

idem::identity make_id(std::string_view hint) { return idem::identity("RedisWaitTest.action", unique_key(hint)); }

// A store whose waiters can only be woken by pub/sub or by a holder's lease running out.
std::unique_ptr<idem::redis_store> event_only_store(const idem::redis_test::address& where) {
  auto options = test_options(where);
  options.fallback_recheck = 1h;
  return std::make_unique<idem::redis_store>(options);
}

// Subscribers of `channel`, as Redis counts them (on a cluster: sharded subscribers on the node
// serving the channel's slot).
long long subscribers(raw_redis& redis, const std::string& channel) {
  auto reply = idem::redis_test::on_cluster() ? redis.run_where(channel, {"PUBSUB", "SHARDNUMSUB", channel})
                                              : redis.run({"PUBSUB", "NUMSUB", channel});
  REQUIRE(reply->type == REDIS_REPLY_ARRAY);
  REQUIRE(reply->elements == 2);
  return reply->element[1]->integer;
}

// Waits (bounded) until Redis counts `expected` subscribers of `channel`. Redis offers no event for
// "a client subscribed", so this looks every millisecond; it never decides a case by timing.
bool await_subscribers(raw_redis& redis, const std::string& channel, long long expected) {
  for (int i = 0; i < 5000; ++i) {
    if (subscribers(redis, channel) == expected) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// Waits (bounded) until the store has sent at least `count` round trips.
bool await_round_trips(const idem::redis_store& store, std::uint64_t count) {
  for (int i = 0; i < 5000; ++i) {
    if (store.statistics().round_trips >= count) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

}  // namespace

TEST_CASE("a waiter learns of completion through pub/sub, and unsubscribes afterwards") {
  const auto where = fixture_address();
  auto store = event_only_store(where);
  raw_redis redis(where);
  const auto id = make_id("wake-complete");
  auto token = require_acquired(store->try_acquire(make_context(id, 60s, 0ms)));

  const std::uint64_t before = store->statistics().round_trips;
  stopwatch clock;
  background<idem::acquire_result> waiter([&] { return store->try_acquire(make_context(id, 60s, 30s)); });
  REQUIRE(await_subscribers(redis, store->channel(id), 1));
  // The waiter looks once, subscribes, and looks again once its client has read the confirmation.
  // Complete only after that second look: otherwise the second look may find the record complete
  // and answer from it, which is right but not what this case checks.
  REQUIRE(await_round_trips(*store, before + 2));
  CHECK_FALSE(waiter.finished_within(0ms));
  store->complete(id, token, sample_payload("done"), 1h);
  // Neither the 60 s lease nor the 30 s wait nor the 1 h fallback can end the wait: only the message.
  REQUIRE(waiter.finished_within(10s));
  CHECK(require_duplicate(waiter.result()).value == sample_payload("done"));
  CHECK(clock.elapsed() < 30s);
  CHECK(store->statistics().wakeups >= 1);
  // The message carried the completion: no look at the record after the wake-up.
  CHECK(store->statistics().message_answers == 1);
  CHECK(await_subscribers(redis, store->channel(id), 0));
}

TEST_CASE("a waiter learns of a release through pub/sub and acquires") {
  const auto where = fixture_address();
  auto store = event_only_store(where);
  raw_redis redis(where);
  const auto id = make_id("wake-release");
  auto token = require_acquired(store->try_acquire(make_context(id, 60s, 0ms)));
  background<idem::acquire_result> waiter([&] { return store->try_acquire(make_context(id, 60s, 30s)); });
  REQUIRE(await_subscribers(redis, store->channel(id), 1));
  store->release(id, token);
  REQUIRE(waiter.finished_within(10s));
  auto second = require_acquired(waiter.result());
  CHECK_FALSE(second == token);
  CHECK(store->statistics().message_answers == 0);  // a release is looked at, then claimed
}

TEST_CASE("waiters of one store share one subscriber connection") {
  const auto where = fixture_address();
  auto store = event_only_store(where);
  raw_redis redis(where);
  const auto id = make_id("shared-subscription");
  const auto other = make_id("shared-subscription-other");
  auto token = require_acquired(store->try_acquire(make_context(id, 60s, 0ms)));
  auto other_token = require_acquired(store->try_acquire(make_context(other, 60s, 0ms)));

  std::vector<std::unique_ptr<background<idem::acquire_result>>> waiters;
  for (int i = 0; i < 6; ++i) {
    const auto& target = i % 2 == 0 ? id : other;
    waiters.push_back(std::make_unique<background<idem::acquire_result>>(
        [&store, &target] { return store->try_acquire(make_context(target, 60s, 30s)); }));
  }
  // Three waiters per key, one subscription per channel.
  REQUIRE(await_subscribers(redis, store->channel(id), 1));
  REQUIRE(await_subscribers(redis, store->channel(other), 1));
  const std::string clients = redis.text({"CLIENT", "LIST", "TYPE", "pubsub"});
  store->complete(id, token, sample_payload("one"), 1h);
  store->complete(other, other_token, sample_payload("two"), 1h);
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    REQUIRE(waiters[i]->finished_within(10s));
    CHECK(require_duplicate(waiters[i]->result()).value == sample_payload(i % 2 == 0 ? "one" : "two"));
  }
  // Each subscription is on the same connection: the one that carries both channels. In a cluster
  // each master has its own subscriber connection, which carries its slots' channels (sharded).
  INFO(clients);
  if (idem::redis_test::on_cluster()) {
    CHECK(store->statistics().wakeups == 2);  // one message per channel, shared by its three waiters
  } else {
    CHECK(clients.find("sub=2") != std::string::npos);
  }
}

TEST_CASE("a waiter takes over when the holder's lease runs out, with no message to wake it") {
  const auto where = fixture_address();
  auto store = event_only_store(where);
  const auto id = make_id("lease-timer");
  require_acquired(store->try_acquire(make_context(id, 200ms, 0ms)));
  stopwatch clock;
  auto result = store->try_acquire(make_context(id, 5s, 10s));
  require_acquired(result);
  CHECK(clock.elapsed() >= 150ms);
  CHECK(clock.elapsed() < 10s);
}

TEST_CASE("a zero wait looks once and never subscribes") {
  const auto where = fixture_address();
  auto store = event_only_store(where);
  raw_redis redis(where);
  const auto id = make_id("zero-wait");
  require_acquired(store->try_acquire(make_context(id, 30s, 0ms)));
  const auto before = store->statistics();
  auto answer = require_in_flight(store->try_acquire(make_context(id, 30s, 0ms)));
  CHECK(answer.retry_after > 25s);
  CHECK(answer.retry_after <= 30s);
  CHECK(store->statistics().round_trips == before.round_trips + 1);
  CHECK(subscribers(redis, store->channel(id)) == 0);
}

TEST_CASE("a waiter still learns of completion when its subscriber connection is killed", "[standalone]") {
  idem::redis_test::private_server server;
  auto options = test_options(server.where());
  options.fallback_recheck = 50ms;
  idem::redis_store store(options);
  raw_redis redis(server.where());
  const auto id = make_id("subscriber-killed");
  auto token = require_acquired(store.try_acquire(make_context(id, 60s, 0ms)));
  background<idem::acquire_result> waiter([&] { return store.try_acquire(make_context(id, 60s, 30s)); });
  REQUIRE(await_subscribers(redis, store.channel(id), 1));

  CHECK(redis.integer({"CLIENT", "KILL", "TYPE", "pubsub"}) == 1);
  store.complete(id, token, sample_payload("while resubscribing"), 1h);
  REQUIRE(waiter.finished_within(10s));
  CHECK(require_duplicate(waiter.result()).value == sample_payload("while resubscribing"));
}

TEST_CASE("a waiter whose wait ends answers in flight with the holder's remaining lease") {
  const auto where = fixture_address();
  auto store = event_only_store(where);
  const auto id = make_id("deadline");
  require_acquired(store->try_acquire(make_context(id, 30s, 0ms)));
  stopwatch clock;
  auto answer = require_in_flight(store->try_acquire(make_context(id, 30s, 150ms)));
  CHECK(clock.elapsed() >= 150ms);
  CHECK(clock.elapsed() < 5s);
  CHECK(answer.retry_after > 25s);
  CHECK(answer.retry_after <= 30s);
}
