// tests/redis/redis_cache_test.cpp — the optional local cache of completed records.
#include <chrono>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include <idem/engine.hpp>
#include <idem/metrics.hpp>
#include <idem/redis_store.hpp>

#include <idem/testing/store_contract.hpp>
#include "redis_support.hpp"

namespace {

using namespace std::chrono_literals;
using idem::contract::fingerprint;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::require_in_flight;
using idem::contract::require_mismatch;
using idem::contract::sample_payload;
using idem::contract::unique_key;
using idem::redis_test::fixture_address;
using idem::redis_test::raw_redis;
using idem::redis_test::test_options;

idem::context make_context(const idem::identity& id, std::chrono::milliseconds ttl = 1h,
                           std::optional<std::string> fp = std::nullopt) {
  idem::context ctx{.id = id, .ttl = ttl, .lease = 30s, .wait = 0ms, .fingerprint = std::move(fp)};
  ctx.validate();
  return ctx;
}

idem::identity make_id(std::string_view hint) { return idem::identity("RedisCacheTest.action", unique_key(hint)); }

std::unique_ptr<idem::redis_store> cached_store(std::chrono::milliseconds max_age = 1min) {
  auto options = test_options(fixture_address());
  options.local_cache = {.max_entries = 1000, .max_age = max_age};
  return std::make_unique<idem::redis_store>(options);
}

}  // namespace

TEST_CASE("hot replays come from the local cache without a round trip") {
  auto store = cached_store();
  auto other_process = cached_store();
  const auto id = make_id("hot");
  auto token = require_acquired(store->try_acquire(make_context(id)));
  store->complete(id, token, sample_payload("cached"), 1h);

  // The completing store caches its own completion.
  auto before = store->statistics();
  for (int i = 0; i < 100; ++i) {
    const idem::duplicate replay = require_duplicate(store->try_acquire(make_context(id)));
    CHECK(replay.value == sample_payload("cached"));
    CHECK(replay.from_cache);
  }
  CHECK(store->statistics().round_trips == before.round_trips);
  CHECK(store->statistics().cache_hits == before.cache_hits + 100);

  // Another store caches what its first replay fetched.
  before = other_process->statistics();
  CHECK_FALSE(require_duplicate(other_process->try_acquire(make_context(id))).from_cache);
  CHECK(require_duplicate(other_process->try_acquire(make_context(id))).from_cache);
  CHECK(other_process->statistics().round_trips == before.round_trips + 1);
}

TEST_CASE("an engine's metrics count the replays served from the local cache") {
  auto store = cached_store();
  auto metrics = std::make_shared<idem::metrics>();
  idem::engine engine{*store, {}, {.metrics = metrics}};
  const auto ctx = engine.make_context("RedisCacheTest.metrics", unique_key("metrics"), {.wait = 0ms});
  CHECK(engine.execute(ctx, [] {}).ran());
  for (int i = 0; i < 3; ++i) CHECK(engine.execute(ctx, [] {}).is_replay());
  const std::string text = metrics->render();
  CHECK(text.find("\nidem_cache_hits_total{store=\"redis_store\"} 3\n") != std::string::npos);
}

TEST_CASE("the local cache never serves an in-progress record") {
  auto store = cached_store();
  const auto id = make_id("in-progress");

  // Long enough that the replay right after the completion still finds it on a loaded machine
  // (a 50 ms ttl could pass between the two under the sanitizers), short enough to wait out.
  constexpr auto ttl = 500ms;
  // In progress: every look goes to Redis and answers in flight.
  auto token = require_acquired(store->try_acquire(make_context(id, ttl)));
  for (int i = 0; i < 3; ++i) require_in_flight(store->try_acquire(make_context(id, ttl)));
  CHECK(store->statistics().cache_hits == 0);

  // Complete with a short ttl, replay once (cached), then let the ttl pass: the record is
  // acquired afresh and the new claim is in progress, never the old cached completion.
  store->complete(id, token, sample_payload("generation 1"), ttl);
  require_duplicate(store->try_acquire(make_context(id, ttl)));
  std::this_thread::sleep_for(ttl + 100ms);  // the ttl itself has to pass
  auto token2 = require_acquired(store->try_acquire(make_context(id, 1h)));
  require_in_flight(store->try_acquire(make_context(id, 1h)));
  store->complete(id, token2, sample_payload("generation 2"), 1h);
  CHECK(require_duplicate(store->try_acquire(make_context(id))).value == sample_payload("generation 2"));
}

TEST_CASE("the local cache applies the fingerprint rule") {
  auto store = cached_store();
  const auto id = make_id("fingerprint");
  auto token = require_acquired(store->try_acquire(make_context(id, 1h, fingerprint('a'))));
  store->complete(id, token, sample_payload(), 1h);
  const auto before = store->statistics();
  auto mismatch = require_mismatch(store->try_acquire(make_context(id, 1h, fingerprint('b'))));
  CHECK(mismatch.stored == fingerprint('a'));
  CHECK(mismatch.received == fingerprint('b'));
  require_duplicate(store->try_acquire(make_context(id, 1h, fingerprint('a'))));
  require_duplicate(store->try_acquire(make_context(id, 1h)));
  CHECK(store->statistics().round_trips == before.round_trips);
}

TEST_CASE("a cached completion is served at most max_age after it was cached") {
  auto store = cached_store(50ms);
  raw_redis redis(fixture_address());
  const auto id = make_id("max-age");
  auto token = require_acquired(store->try_acquire(make_context(id)));
  store->complete(id, token, sample_payload(), 1h);
  // An operator deletes the record behind the cache's back.
  REQUIRE(redis.integer({"DEL", store->record_key(id)}) == 1);
  require_duplicate(store->try_acquire(make_context(id)));  // stale, within max_age: documented
  std::this_thread::sleep_for(80ms);                        // max_age itself has to pass
  require_acquired(store->try_acquire(make_context(id)));
}
