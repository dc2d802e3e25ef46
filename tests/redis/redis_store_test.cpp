// tests/redis/redis_store_test.cpp — what the Redis store promises beyond the contract: record
// layout, scripts, foreign data, native expiry, purge, configuration, the engine on top.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/redis_store.hpp>

#include <idem/testing/store_contract.hpp>
#include "redis_support.hpp"
#include "record_codec.hpp"
#include "scripts.hpp"
#include "support/eventually.hpp"

namespace {

using namespace std::chrono_literals;
using idem::contract::fingerprint;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::require_in_flight;
using idem::contract::sample_payload;
using idem::contract::unique_key;
using idem::redis_test::fixture_address;
using idem::redis_test::fixture_store;
using idem::redis_test::raw_redis;
using idem::redis_test::test_options;
using idem::redis_test::unique_prefix;
using idem::test::eventually;

idem::context make_context(const idem::identity& id, std::chrono::milliseconds lease = 5s,
                           std::chrono::milliseconds wait = 0ms, std::chrono::milliseconds ttl = 1h) {
  idem::context ctx{.id = id, .ttl = ttl, .lease = lease, .wait = wait};
  ctx.validate();
  return ctx;
}

idem::identity make_id(std::string_view hint, std::string scope = "RedisStoreTest.action") {
  return idem::identity(std::move(scope), unique_key(hint));
}

}  // namespace

TEST_CASE("record key holds the prefix, the scope and the SHA-256 of the key, never the key", "[standalone]") {
  auto store = fixture_store("app:idem:");
  const idem::identity id("Orders.place", "order-42");
  const auto digest = id.key_digest();
  CHECK(store->record_key(id) == "app:idem:rec:Orders.place:" + idem::to_hex(digest.data(), digest.size()));
  CHECK(store->channel(id) == "app:idem:evt:Orders.place:" + idem::to_hex(digest.data(), digest.size()));
  CHECK(store->record_key(id).find("order-42") == std::string::npos);
  CHECK(store->name() == "redis_store");
}

TEST_CASE("the scripts' local SHA-1 digests are the ones SCRIPT LOAD reports") {
  raw_redis redis(fixture_address());
  const auto& s = idem::detail::redis::scripts();
  for (const auto* script : {&s.acquire, &s.complete, &s.release, &s.extend, &s.purge}) {
    INFO("script " << script->name);
    CHECK(redis.text({"SCRIPT", "LOAD", script->source}) == script->sha);
  }
}

TEST_CASE("a record is a string marked as idem's, with a native expiry as a backstop") {
  const auto where = fixture_address();
  auto options = test_options(where);
  options.retention_grace = 10s;
  idem::redis_store store(options);
  raw_redis redis(where);
  const auto id = make_id("layout");
  const std::string key = store.record_key(id);

  auto token = require_acquired(store.try_acquire(make_context(id, 30s, 0ms, 2min)));
  CHECK(redis.text({"TYPE", key}) == "string");
  std::string value = redis.text({"GET", key});
  INFO(value);
  CHECK(value.starts_with("idem/2 p "));
  CHECK(value.ends_with(" - " + token.to_string() + "\n"));
  // In progress: native expiry >= max(lease, ttl) + grace, minus the time this took.
  long long pttl = redis.integer({"PTTL", key});
  CHECK(pttl > (120'000 + 10'000 - 5'000));
  CHECK(pttl <= 120'000 + 10'000);

  // A heartbeat longer than the ttl raises the native expiry with it; a short one never lowers it.
  CHECK(store.extend(id, token, 10min));
  pttl = redis.integer({"PTTL", key});
  CHECK(pttl > (600'000 + 10'000 - 5'000));
  CHECK(store.extend(id, token, 1s));
  CHECK(redis.integer({"PTTL", key}) > (600'000 + 10'000 - 5'000));

  store.complete(id, token, sample_payload(), 20s);
  value = redis.text({"GET", key});
  CHECK(value.starts_with("idem/2 c "));
  CHECK(value.find(token.to_string()) == std::string::npos);
  CHECK(value.ends_with("11:test/sample5:hello33:9:requestId7:abc-1236:status3:200"));
  // Complete: the native expiry is the ttl itself, without the grace, so a complete record that
  // Redis still holds is live and a replay needs no clock read.
  pttl = redis.integer({"PTTL", key});
  CHECK(pttl > 20'000 - 5'000);
  CHECK(pttl <= 20'000);
}

TEST_CASE("Redis forgets a record by its native expiry even if purge never runs") {
  const auto where = fixture_address();
  auto options = test_options(where);
  options.retention_grace = 0ms;
  idem::redis_store store(options);
  raw_redis redis(where);
  const auto id = make_id("native-expiry");
  auto token = require_acquired(store.try_acquire(make_context(id, 5s, 0ms, 1h)));
  store.complete(id, token, sample_payload(), 30ms);
  std::this_thread::sleep_for(80ms);  // the ttl itself has to pass
  CHECK(redis.integer({"EXISTS", store.record_key(id)}) == 0);
}

TEST_CASE("NOSCRIPT: a script cache flushed mid-run is reloaded with EVAL and the call succeeds", "[standalone]") {
  // A server of its own: on the shared one, other cases' calls reload the scripts at any moment.
  idem::redis_test::private_server server;
  auto store = std::make_unique<idem::redis_store>(test_options(server.where()));
  raw_redis redis(server.where());
  const auto id = make_id("noscript");
  auto token = require_acquired(store->try_acquire(make_context(id)));
  const auto reloads_before = store->statistics().script_reloads;

  REQUIRE(redis.text({"SCRIPT", "FLUSH"}) == "OK");
  store->complete(id, token, sample_payload("after flush"), 1h);
  CHECK(store->statistics().script_reloads == reloads_before + 1);

  REQUIRE(redis.text({"SCRIPT", "FLUSH"}) == "OK");
  auto replay = require_duplicate(store->try_acquire(make_context(id)));
  CHECK(replay.value == sample_payload("after flush"));
  CHECK(store->statistics().script_reloads == reloads_before + 2);
  // EVAL cached it again: the next call goes through EVALSHA.
  require_duplicate(store->try_acquire(make_context(id)));
  CHECK(store->statistics().script_reloads == reloads_before + 2);
}

TEST_CASE("foreign data under the prefix is refused and never modified") {
  auto store = fixture_store();
  raw_redis redis(fixture_address());
  const auto id = make_id("foreign");
  const std::string key = store->record_key(id);
  const idem::lease_token some_token = idem::lease_token::generate();

  auto check_refused_and_untouched = [&] {
    const std::string before = redis.text({"DUMP", key});
    const long long ttl_before = redis.integer({"PTTL", key});
    CHECK_THROWS_AS(store->try_acquire(make_context(id)), idem::foreign_record_error);
    CHECK_THROWS_AS(store->try_acquire(make_context(id, 5s, 200ms)), idem::foreign_record_error);
    CHECK_THROWS_AS(store->complete(id, some_token, sample_payload(), 1h), idem::foreign_record_error);
    CHECK_THROWS_AS(store->release(id, some_token), idem::foreign_record_error);
    CHECK_NOTHROW(store->extend(id, some_token, 1h));
    store->purge_expired();
    CHECK(redis.text({"DUMP", key}) == before);
    CHECK(redis.integer({"PTTL", key}) == ttl_before);
  };

  SECTION("a string") {
    REQUIRE(redis.text({"SET", key, "application data"}) == "OK");
    check_refused_and_untouched();
    try {
      store->try_acquire(make_context(id));
    } catch (const idem::foreign_record_error& e) {
      const std::string message = e.what();
      CHECK(message.find(id.to_string()) != std::string::npos);
      CHECK(message.find(id.key()) == std::string::npos);
      CHECK(message.find("try_acquire") != std::string::npos);
    }
  }
  SECTION("a list") {
    REQUIRE(redis.integer({"RPUSH", key, "a", "b"}) == 2);
    check_refused_and_untouched();
  }
  SECTION("a hash") {
    REQUIRE(redis.integer({"HSET", key, "st", "c", "ex", "0"}) == 2);
    check_refused_and_untouched();
  }
  SECTION("a string that only resembles a record") {
    REQUIRE(redis.text({"SET", key, "idem 1 c 0 0 - - 0\n"}) == "OK");
    check_refused_and_untouched();
  }
  redis.run({"DEL", key});
}

TEST_CASE("a record of an unknown format fails closed") {
  auto store = fixture_store();
  raw_redis redis(fixture_address());
  const auto id = make_id("format");
  const std::string key = store->record_key(id);
  const std::string future_record = "idem/9 c 0 99999999999999 - - 0\nsomething new";
  REQUIRE(redis.text({"SET", key, future_record}) == "OK");
  try {
    store->try_acquire(make_context(id));
    FAIL("expected corrupt_record_error");
  } catch (const idem::corrupt_record_error& e) {
    CHECK(std::string(e.what()).find("format version") != std::string::npos);
  }
  CHECK(redis.text({"GET", key}) == future_record);
  redis.run({"DEL", key});
}

TEST_CASE("a malformed payload is corrupt_record_error, not a crash") {
  auto store = fixture_store();
  raw_redis redis(fixture_address());
  const auto id = make_id("malformed");
  auto token = require_acquired(store->try_acquire(make_context(id)));
  store->complete(id, token, sample_payload(), 1h);
  const std::string key = store->record_key(id);
  std::string value = redis.text({"GET", key});
  value.resize(value.size() - 3);  // cut into the attributes
  REQUIRE(redis.text({"SET", key, value, "KEEPTTL"}) == "OK");
  CHECK_THROWS_AS(store->try_acquire(make_context(id)), idem::corrupt_record_error);
  // A header that does not parse is corrupt as well, and left alone.
  REQUIRE(redis.text({"SET", key, "idem/2 c zero\n", "KEEPTTL"}) == "OK");
  CHECK_THROWS_AS(store->try_acquire(make_context(id)), idem::corrupt_record_error);
  CHECK(redis.text({"GET", key}) == "idem/2 c zero\n");
}

// Found by tests/fuzz (redis_record): lengths with leading zeros and names out of order decoded
// (two spellings of one record), and a completion time past what system_clock holds overflowed
// converting it to the replay's time_point.
TEST_CASE("record codec: one spelling per record, and completion times the clock can hold") {
  namespace rd = idem::detail::redis;
  CHECK(rd::parse_int("0") == 0);
  CHECK(rd::parse_int("1700000000000") == 1700000000000);
  CHECK_FALSE(rd::parse_int("007"));
  CHECK(rd::decode_attributes("1:a1:1") == rd::attribute_map{{"a", "1"}});
  CHECK_FALSE(rd::decode_attributes("01:a1:1"));
  CHECK_FALSE(rd::decode_attributes("1:b1:11:a1:2"));
  const std::string body = rd::encode_payload(idem::payload::none());
  CHECK(rd::decode_complete("idem/2 c " + std::to_string(rd::max_time_point_ms) + " 1 -\n" + body));
  CHECK_FALSE(rd::decode_complete("idem/2 c " + std::to_string(rd::max_time_point_ms + 1) + " 1 -\n" + body));
  CHECK_FALSE(rd::decode_complete("idem/2 c 9223372036854775807 1 -\n" + body));
}

TEST_CASE("binary bodies and attributes round-trip byte for byte") {
  auto store = fixture_store();
  const auto id = make_id("binary");
  idem::payload value;
  value.type = "application/octet-stream";
  for (int i = 0; i < 4096; ++i) value.body.push_back(static_cast<char>(i % 256));
  value.attributes = {{"", "empty name"}, {"colon:1", "3:x"}, {std::string("nul\0in", 6), std::string("\0\xff", 2)}};
  auto token = require_acquired(store->try_acquire(make_context(id)));
  store->complete(id, token, value, 1h);
  CHECK(require_duplicate(store->try_acquire(make_context(id))).value == value);
}

TEST_CASE("the raw key never reaches Redis: not in a key, a value, a channel or a command", "[standalone]") {
  const auto where = fixture_address();
  const std::string prefix = unique_prefix("rawkey");
  auto options = test_options(where, prefix);
  idem::redis_store store(options);
  const std::string raw_key = "client-secret-" + idem::lease_token::generate().to_string();
  const idem::identity id("RawKey.action", raw_key);

  // Every command Redis executes while the store works, as MONITOR reports it.
  raw_redis monitor(where);
  REQUIRE(monitor.text({"MONITOR"}) == "OK");
  const std::string end_marker = "end-of-raw-key-test-" + idem::lease_token::generate().to_string();
  std::string seen;
  std::thread reader([&] {
    try {
      for (;;) {
        void* raw = nullptr;
        if (redisGetReply(monitor.connection().context(), &raw) != REDIS_OK || raw == nullptr) return;
        idem::detail::redis::reply_ptr line(static_cast<redisReply*>(raw));
        seen += idem::detail::redis::text(line.get());
        seen += '\n';
        if (seen.find(end_marker) != std::string::npos) return;
      }
    } catch (...) {
    }
  });

  {
    auto token = require_acquired(store.try_acquire(make_context(id, 5s, 0ms, 1h)));
    CHECK(store.extend(id, token, 10s));
    std::thread waiter([&] { (void)store.try_acquire(make_context(id, 5s, 2s, 1h)); });
    REQUIRE(eventually([&] { return store.waiting() == 1; }, 10s));  // the waiter subscribed
    store.complete(id, token, sample_payload(), 1h);
    waiter.join();
    require_duplicate(store.try_acquire(make_context(id)));
    const idem::identity other("RawKey.action", raw_key + "-released");
    auto token2 = require_acquired(store.try_acquire(make_context(other)));
    store.release(other, token2);
    store.purge_expired();
  }
  raw_redis control(where);
  control.run({"ECHO", end_marker});
  reader.join();

  INFO("MONITOR saw:\n" << seen);
  CHECK(seen.find("EVALSHA") != std::string::npos);
  CHECK(seen.find(raw_key) == std::string::npos);

  for (const std::string& key : control.keys(prefix + "*")) {
    CHECK(key.find(raw_key) == std::string::npos);
    const std::string dump = control.text({"DUMP", key});
    CHECK(dump.find(raw_key) == std::string::npos);
  }
}

TEST_CASE("purge works in bounded pages, resumes where it stopped and escapes glob characters") {
  const auto where = fixture_address();
  raw_redis redis(where);
  const std::string prefix = unique_prefix("purge") + "[*?]:";
  auto options = test_options(where, prefix);
  options.purge_batch = 4;
  options.purge_max_pages = 2;
  idem::redis_store store(options);

  // Claims whose lease and ttl run out: a complete record expires natively at its ttl, so what
  // purge finds is in-progress records its holders abandoned (kept for the retention grace).
  constexpr int expired = 40;
  for (int i = 0; i < expired; ++i) {
    require_acquired(store.try_acquire(make_context(make_id("purge-" + std::to_string(i)), 2ms, 0ms, 1ms)));
  }
  const auto live = make_id("purge-live");
  auto live_token = require_acquired(store.try_acquire(make_context(live)));
  store.complete(live, live_token, sample_payload(), 1h);
  // Look-alike keys the pattern must not match if the prefix's glob characters were not escaped.
  // `[*?]` unescaped is a character class that matches the '?' here.
  const std::string lookalike = prefix.substr(0, prefix.size() - 5) + "?:rec:Foo.bar:00";
  REQUIRE(redis.text({"SET", lookalike, "idem/2 c 1 1 -\n4:type0:0:"}) == "OK");
  std::this_thread::sleep_for(10ms);  // the 2 ms leases and 1 ms ttls have to pass

  std::size_t first = store.purge_expired();
  CHECK(first < expired);  // 2 pages of about 4 keys each: not everything at once
  std::size_t total = first;
  for (int call = 0; call < 20'000 && total < expired; ++call) total += store.purge_expired();
  CHECK(total == expired);
  require_duplicate(store.try_acquire(make_context(live)));
  CHECK(redis.integer({"EXISTS", lookalike}) == 1);
  redis.run({"DEL", lookalike});
}

TEST_CASE("configuration errors fail in the constructor") {
  const auto where = fixture_address();
  auto bad = [&](auto mutate) {
    auto options = test_options(where);
    mutate(options);
    return options;
  };
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.prefix.clear(); })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.host.clear(); })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.port = 0; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.port = 70000; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.database = -1; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.connect_timeout = 0ms; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.command_timeout = 0ms; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.retention_grace = -1ms; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.fallback_recheck = 0ms; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.pool_size = 0; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.purge_batch = 0; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.purge_max_pages = 0; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.username = "u"; })), idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.replica_ack = {.replicas = -1}; })),
                  idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.replica_ack = {.replicas = 1, .timeout = 0ms}; })),
                  idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.replica_ack = {.replicas = 1, .timeout = 5s}; })),
                  idem::configuration_error);
  CHECK_THROWS_AS(idem::redis_store(bad([](auto& o) { o.local_cache = {.max_entries = 10, .max_age = 0ms}; })),
                  idem::configuration_error);
  try {
    idem::redis_store store(bad([](auto& o) { o.command_timeout = 0ms; }));
  } catch (const idem::configuration_error& e) {
    CHECK(std::string(e.what()) == "redis_store_options.command_timeout must be at least 1ms, got: PT0S");
  }
  // Valid options never connect in the constructor: a Redis that is down is the first call's error.
  CHECK_NOTHROW(idem::redis_store(bad([](auto& o) { o.port = 1; })));
}

TEST_CASE("replica acknowledgement that cannot be met is durability_error, and frees the key", "[standalone]") {
  const auto where = fixture_address();
  auto options = test_options(where);
  options.replica_ack = {.replicas = 1, .timeout = 50ms};
  idem::redis_store demanding(options);
  auto plain = fixture_store();
  const auto id = make_id("durability");
  try {
    demanding.try_acquire(make_context(id));
    FAIL("expected durability_error");
  } catch (const idem::durability_error& e) {
    const std::string message = e.what();
    CHECK(message.find("required replicas") != std::string::npos);
    CHECK(message.find(id.to_string()) != std::string::npos);
  }
  // The claim was given back, so the key does not stay blocked for a lease.
  auto token = require_acquired(plain->try_acquire(make_context(id)));
  // A completion whose acknowledgement fails is still written (and observable).
  CHECK_THROWS_AS(demanding.complete(id, token, sample_payload(), 1h), idem::durability_error);
  require_duplicate(plain->try_acquire(make_context(id)));
}

TEST_CASE("many threads share one store") {
  auto store = fixture_store();
  constexpr int threads = 8;
  constexpr int per_thread = 50;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const auto id = make_id("threads-" + std::to_string(t) + "-" + std::to_string(i));
        const auto ctx = make_context(id);
        auto first = store->try_acquire(ctx);
        if (!std::holds_alternative<idem::acquired>(first)) {
          ++failures;
          continue;
        }
        store->complete(id, std::get<idem::acquired>(first).token, sample_payload(std::to_string(i)), 1h);
        auto again = store->try_acquire(ctx);
        if (!std::holds_alternative<idem::duplicate>(again) ||
            std::get<idem::duplicate>(again).value.body != std::to_string(i)) {
          ++failures;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  CHECK(failures == 0);
  // At most pool_size connections per server (a cluster has three masters).
  const std::size_t servers = idem::redis_test::on_cluster() ? 3 : 1;
  CHECK(store->statistics().connections_opened <= store->options().pool_size * servers);
}

TEST_CASE("the engine on a redis_store runs an action once and replays its result") {
  auto store = fixture_store();
  idem::engine engine(*store);
  const std::string key = unique_key("engine");
  int runs = 0;
  auto call = [&] {
    auto ctx = engine.make_context("RedisEngine.charge", key);
    return engine.execute<std::string>(ctx, [&] { return "receipt-" + std::to_string(++runs); }, idem::string_codec{});
  };
  auto first = call();
  REQUIRE(std::holds_alternative<idem::executed<std::string>>(first));
  CHECK(std::get<idem::executed<std::string>>(first).value == "receipt-1");
  auto second = call();
  REQUIRE(std::holds_alternative<idem::replayed<std::string>>(second));
  CHECK(std::get<idem::replayed<std::string>>(second).value == "receipt-1");
  CHECK(runs == 1);
}

TEST_CASE("the documented ACL is enough for the whole lifecycle, and confines the store to its prefix", "[standalone]") {
  const auto where = fixture_address();
  raw_redis admin(where);
  const std::string prefix = unique_prefix("acl");
  const std::string user = "idem-" + idem::lease_token::generate().to_string().substr(0, 10);
  const std::string password = idem::lease_token::generate().to_string();
  // docs/stores/redis.md, "Least privilege".
  auto reply = admin.run({"ACL", "SETUSER", user, "reset", "on", ">" + password, "~" + prefix + "*",
                          "&" + prefix + "evt:*", "+evalsha", "+eval", "+scan", "+wait", "+subscribe",
                          "+unsubscribe", "+ping", "+get", "+getrange", "+set", "+del", "+exists", "+pttl",
                          "+time", "+publish"});
  REQUIRE(reply->type != REDIS_REPLY_ERROR);

  auto options = test_options(where, prefix);
  options.username = user;
  options.password = password;
  idem::redis_store store(options);
  const auto id = make_id("acl");
  auto token = require_acquired(store.try_acquire(make_context(id, 5s)));
  CHECK(store.extend(id, token, 10s));
  idem::contract::background<idem::acquire_result> waiter(
      [&] { return store.try_acquire(make_context(id, 5s, 10s)); });
  store.complete(id, token, sample_payload(), 1h);
  REQUIRE(waiter.finished_within(10s));
  require_duplicate(waiter.result());
  const auto other = make_id("acl-release");
  store.release(other, require_acquired(store.try_acquire(make_context(other))));
  CHECK_NOTHROW(store.purge_expired());

  // Outside its prefix the same user is refused, by Redis.
  auto outside_options = test_options(where, unique_prefix("acl-outside"));
  outside_options.username = user;
  outside_options.password = password;
  idem::redis_store outside(outside_options);
  CHECK_THROWS_AS(outside.try_acquire(make_context(make_id("outside"))), idem::store_unavailable_error);
  admin.run({"ACL", "DELUSER", user});
}

TEST_CASE("wrong credentials are store_unavailable_error naming AUTH") {
  const auto where = fixture_address();
  auto options = test_options(where);
  options.username = "nobody-" + idem::lease_token::generate().to_string().substr(0, 8);
  options.password = "wrong";
  idem::redis_store store(options);
  const auto id = make_id("auth");
  try {
    store.try_acquire(make_context(id));
    FAIL("expected store_unavailable_error");
  } catch (const idem::store_unavailable_error& e) {
    CHECK(std::string(e.what()).find("AUTH") != std::string::npos);
  }
}

TEST_CASE("purge reads the whole header of the longest valid record") {
  const std::string prefix = unique_prefix("purge-longest");
  auto store = fixture_store(prefix);
  raw_redis redis(fixture_address());
  // An expired in-progress record whose header is as long as a valid one can be: every number 19
  // digits wide (leading zeros: long ago, so expired), the longest fingerprint, a token.
  const std::string wide(18, '0');
  const std::string token = idem::lease_token::generate().to_string();
  const std::string header = "idem/2 p " + wide + "1 " + wide + "1 " + wide + "1 " + wide + "1 " +
                             std::string(idem::max_fingerprint_length, 'f') + " " + token + "\n";
  REQUIRE(header.size() == idem::detail::redis::max_header_length);
  const auto id = make_id("purge-longest");
  const std::string key = store->record_key(id);
  REQUIRE(redis.text({"SET", key, header, "PX", "600000"}) == "OK");

  CHECK(store->purge_expired() == 1);
  CHECK(redis.integer({"EXISTS", key}) == 0);
}
