// Privacy on the Redis store (the "redis" fixture's server, or the "redis_cluster" fixture's cluster when
// built as idem_privacy_redis_cluster_tests): the main scenarios, a store pointed
// at a closed port, and every key under the store's prefix (SCAN) and its value (GET) scanned.
#include "privacy/privacy_support.hpp"

#include <idem/redis_store.hpp>

#include "redis/redis_support.hpp"

using namespace idem::privacy;
namespace rt = idem::redis_test;

TEST_CASE("redis store: no scenario reveals the key, and Redis never holds it", "[privacy]") {
  const std::string prefix = rt::unique_prefix("privacy");
  transcript t;
  {
    auto store = rt::fixture_store(prefix);
    run_store_scenarios(*store, t, "Privacy");
  }
  rt::raw_redis redis(rt::fixture_address());
  const auto keys = redis.keys(prefix + "*");
  CHECK(keys.size() >= 4);  // run, throws (retried), fingerprint, lease: the records left complete
  for (const std::string& key : keys) {
    INFO(key);
    CHECK_FALSE(reveals(key));
    if (redis.text({"TYPE", key}) == "string") CHECK_FALSE(reveals(redis.text({"GET", key})));
  }
  t.require_clean(12);
}

TEST_CASE("redis store: a server that cannot be reached is reported without the key", "[privacy]") {
  transcript t;
  expect_error(t, "store down", [&] {
    idem::redis_store store{rt::test_options({"127.0.0.1", closed_port()}, rt::unique_prefix("privacy-down"))};
    idem::engine eng(store, idem::config{}, hooks_for(t));
    auto ctx = eng.make_context("Privacy.down", std::string(secret));
    static_cast<void>(eng.execute(ctx, [] {}));
  });
  t.require_clean(1);
}
