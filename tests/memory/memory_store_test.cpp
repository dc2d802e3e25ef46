// tests/memory/memory_store_test.cpp — what idem::memory_store promises beyond the store contract:
// its wait budget holds under contention and spurious wakes, waiters wake on events, size() and
// purge_expired() count exactly, shard counts of any size work, and its messages name the record.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <latch>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include <idem/errors.hpp>
#include <idem/memory_store.hpp>

#include <idem/testing/store_contract.hpp>

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using idem::contract::fresh_identity;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::require_in_flight;
using idem::contract::sample_payload;
using idem::contract::stopwatch;

idem::context make_context(const idem::identity& id, milliseconds lease, milliseconds wait, milliseconds ttl = 1h) {
  idem::context ctx{.id = id, .ttl = ttl, .lease = lease, .wait = wait};
  ctx.validate();
  return ctx;
}

}  // namespace

TEST_CASE("memory_store: a zero wait under expired-lease contention returns promptly", "[memory][concurrency]") {
  // Every acquisition holds a 2 ms lease and is abandoned, so callers keep stealing from each
  // other. A zero-wait call looks once: it never loops on a lost race.
  constexpr std::size_t threads_count = 8;
  constexpr int calls_per_thread = 200;
  idem::memory_store store;
  const auto id = fresh_identity("steal-contention");
  const auto ctx = make_context(id, 2ms, 0ms);

  std::vector<milliseconds> slowest(threads_count, 0ms);
  std::atomic<std::size_t> unexpected{0};
  {
    std::latch start(threads_count);
    std::vector<std::jthread> threads;
    for (std::size_t t = 0; t < threads_count; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        for (int i = 0; i < calls_per_thread; ++i) {
          const stopwatch watch;
          const auto result = store.try_acquire(ctx);
          slowest[t] = std::max(slowest[t], watch.elapsed());
          if (!std::holds_alternative<idem::acquired>(result) && !std::holds_alternative<idem::in_flight>(result)) {
            unexpected.fetch_add(1);
          }
        }
      });
    }
  }
  CHECK(unexpected.load() == 0);
  for (std::size_t t = 0; t < threads_count; ++t) {
    INFO("thread " << t << ": slowest zero-wait call took " << slowest[t].count() << " ms");
    CHECK(slowest[t] < 2s);
  }
}

TEST_CASE("memory_store: spurious wakes and heartbeats do not stretch the wait budget", "[memory][concurrency]") {
  // One shard, so every completion of another key wakes the waiter; the holder's heartbeat keeps
  // its lease alive throughout. The waiter must still answer in flight once its 200 ms are up.
  idem::memory_store store(idem::memory_store_options{.shards = 1});
  const auto id = fresh_identity("budget");
  const auto holder = require_acquired(store.try_acquire(make_context(id, 5s, 0ms)));

  std::optional<idem::in_flight> answer;
  milliseconds elapsed{0};
  std::atomic<std::size_t> noise_errors{0};
  {
    std::jthread heartbeat([&](std::stop_token stop) {
      while (!stop.stop_requested()) {
        (void)store.extend(id, holder, 5s);
        std::this_thread::sleep_for(10ms);
      }
    });
    std::jthread noise([&](std::stop_token stop) {
      while (!stop.stop_requested()) {
        try {
          const auto other = fresh_identity("noise");
          const auto token = std::get<idem::acquired>(store.try_acquire(make_context(other, 5s, 0ms))).token;
          store.complete(other, token, idem::payload::none(), 1h);
        } catch (...) {
          noise_errors.fetch_add(1);
        }
      }
    });
    const stopwatch watch;
    const auto result = store.try_acquire(make_context(id, 5s, 200ms));
    elapsed = watch.elapsed();
    if (const auto* busy = std::get_if<idem::in_flight>(&result)) answer = *busy;
  }
  INFO("answered after " << elapsed.count() << " ms");
  REQUIRE(answer.has_value());
  CHECK(elapsed >= 200ms);
  CHECK(elapsed < 200ms + 4s);
  CHECK(answer->retry_after <= 5s);
  CHECK(noise_errors.load() == 0);
}

TEST_CASE("memory_store: a waiter is woken by completion and replays", "[memory][concurrency]") {
  idem::memory_store store;
  const auto id = fresh_identity("woken-by-completion");
  // The lease (60 s) outlasts the wait (30 s): only the completion can answer the waiter in time.
  const auto holder = require_acquired(store.try_acquire(make_context(id, 60s, 0ms)));
  std::latch started(1);
  idem::contract::background<idem::acquire_result> waiter([&] {
    started.count_down();
    return store.try_acquire(make_context(id, 60s, 30s));
  });
  started.wait();
  store.complete(id, holder, sample_payload(), 1h);
  REQUIRE(waiter.finished_within(15s));
  CHECK(require_duplicate(waiter.result()).value == sample_payload());
}

TEST_CASE("memory_store: waiters on keys sharing a shard each get their own record", "[memory][concurrency]") {
  constexpr std::size_t keys = 4;
  idem::memory_store store(idem::memory_store_options{.shards = 1});
  std::vector<idem::identity> ids;
  std::vector<idem::lease_token> holders;
  for (std::size_t i = 0; i < keys; ++i) {
    ids.push_back(fresh_identity("shared-shard-" + std::to_string(i)));
    holders.push_back(require_acquired(store.try_acquire(make_context(ids[i], 60s, 0ms))));
  }
  std::vector<std::unique_ptr<idem::contract::background<idem::acquire_result>>> waiters;
  for (std::size_t i = 0; i < keys; ++i) {
    waiters.push_back(std::make_unique<idem::contract::background<idem::acquire_result>>(
        [&store, id = ids[i]] { return store.try_acquire(make_context(id, 60s, 30s)); }));
  }
  // Even keys complete, odd keys are released: each waiter must see its own key's fate.
  for (std::size_t i = 0; i < keys; ++i) {
    if (i % 2 == 0) {
      store.complete(ids[i], holders[i], sample_payload("key " + std::to_string(i)), 1h);
    } else {
      store.release(ids[i], holders[i]);
    }
  }
  for (std::size_t i = 0; i < keys; ++i) {
    INFO("key " << i);
    REQUIRE(waiters[i]->finished_within(15s));
    const auto result = waiters[i]->result();
    if (i % 2 == 0) {
      CHECK(require_duplicate(result).value.body == "key " + std::to_string(i));
    } else {
      require_acquired(result);
    }
  }
}

TEST_CASE("memory_store: size counts every record and purge removes exactly the expired ones", "[memory]") {
  idem::memory_store store(idem::memory_store_options{.shards = 4});
  CHECK(store.size() == 0);
  CHECK(store.purge_expired() == 0);

  std::vector<idem::identity> short_lived;
  for (int i = 0; i < 10; ++i) {
    const auto id = fresh_identity("short");
    store.complete(id, require_acquired(store.try_acquire(make_context(id, 5s, 0ms))), sample_payload(), 1ms);
    short_lived.push_back(id);
  }
  for (int i = 0; i < 5; ++i) {
    const auto id = fresh_identity("long");
    store.complete(id, require_acquired(store.try_acquire(make_context(id, 5s, 0ms))), sample_payload(), 1h);
  }
  const auto held = fresh_identity("held");
  const auto held_token = require_acquired(store.try_acquire(make_context(held, 60s, 0ms)));
  CHECK(store.size() == 16);

  std::this_thread::sleep_for(20ms);  // let the 1 ms ttls pass
  CHECK(store.size() == 16);           // expired records stay until purged or reacquired
  CHECK(store.purge_expired() == 10);
  CHECK(store.size() == 6);
  CHECK(store.purge_expired() == 0);

  store.release(held, held_token);
  CHECK(store.size() == 5);
}

TEST_CASE("memory_store: an expired complete record is replaced in place by the next acquisition", "[memory]") {
  idem::memory_store store;
  const auto id = fresh_identity("replace-in-place");
  store.complete(id, require_acquired(store.try_acquire(make_context(id, 5s, 0ms))), sample_payload(), 1ms);
  std::this_thread::sleep_for(20ms);
  require_acquired(store.try_acquire(make_context(id, 5s, 0ms)));
  CHECK(store.size() == 1);
}

TEST_CASE("memory_store: any shard count works", "[memory]") {
  for (const std::size_t shards : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{64}, std::size_t{1000}}) {
    INFO("shards = " << shards);
    idem::memory_store store(idem::memory_store_options{.shards = shards});
    std::vector<idem::identity> ids;
    for (int i = 0; i < 50; ++i) {
      ids.push_back(fresh_identity("shards"));
      store.complete(ids.back(), require_acquired(store.try_acquire(make_context(ids.back(), 5s, 0ms))),
                     sample_payload(std::to_string(i)), 1h);
    }
    CHECK(store.size() == 50);
    for (int i = 0; i < 50; ++i) {
      CHECK(require_duplicate(store.try_acquire(make_context(ids[static_cast<std::size_t>(i)], 5s, 0ms))).value.body ==
            std::to_string(i));
    }
  }
}

TEST_CASE("memory_store: a record is found whether its key fits inside the record or is stored apart", "[memory]") {
  // The composite `scope ':' key` is kept inside the record up to 60 characters: keys on both sides
  // of that limit, and at the identity limits, under scopes held both ways.
  const idem::static_scope kept_scope("Layout.scope");  // 12 characters
  idem::memory_store store(idem::memory_store_options{.shards = 1});  // one map: every record meets every other
  std::vector<idem::identity> ids;
  for (const std::size_t key_size : {std::size_t{1}, std::size_t{46}, std::size_t{47}, std::size_t{48},
                                     idem::max_key_length}) {
    ids.emplace_back(kept_scope, std::string(key_size, 'k'));
    ids.emplace_back(std::string(idem::max_scope_length, 's'), std::string(key_size, 'k'));
    ids.emplace_back("Layout.scope", std::string(key_size, 'j'));
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    store.complete(ids[i], require_acquired(store.try_acquire(make_context(ids[i], 5s, 0ms))),
                   sample_payload(std::to_string(i)), 1h);
  }
  CHECK(store.size() == ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    INFO("record " << i);
    CHECK(require_duplicate(store.try_acquire(make_context(ids[i], 5s, 0ms))).value.body == std::to_string(i));
    // The same record under the scope held the other way (a string of the kept name).
    const idem::identity same(std::string(ids[i].scope()), ids[i].key());
    CHECK(require_duplicate(store.try_acquire(make_context(same, 5s, 0ms))).value.body == std::to_string(i));
  }
  // Another identity whose scope and key, joined by any character, spell a stored record's text.
  const idem::identity shifted("Layout", "scope:" + std::string(46, 'k'));
  require_acquired(store.try_acquire(make_context(shifted, 5s, 0ms)));
  CHECK(store.size() == ids.size() + 1);
}

TEST_CASE("memory_store: lease_lost_error names the operation, the masked record and the reason", "[memory]") {
  idem::memory_store store;
  const auto id = fresh_identity("messages");
  const std::string prefix_complete = "cannot complete " + id.to_string() + ": ";
  const std::string prefix_release = "cannot release " + id.to_string() + ": ";
  const auto message_of = [](auto&& mutation) {
    try {
      mutation();
    } catch (const idem::lease_lost_error& e) {
      return std::string(e.what());
    }
    return std::string("(nothing thrown)");
  };

  const std::string absent = message_of([&] { store.release(id, idem::lease_token::generate()); });
  CHECK(absent.rfind(prefix_release, 0) == 0);
  CHECK(absent.find("no record") != std::string::npos);

  const auto token = require_acquired(store.try_acquire(make_context(id, 5s, 0ms)));
  const std::string stolen =
      message_of([&] { store.complete(id, idem::lease_token::generate(), sample_payload(), 1h); });
  CHECK(stolen.rfind(prefix_complete, 0) == 0);
  CHECK(stolen.find("the lease no longer owns the record") != std::string::npos);

  store.complete(id, token, sample_payload(), 1h);
  const std::string complete = message_of([&] { store.release(id, token); });
  CHECK(complete.rfind(prefix_release, 0) == 0);
  CHECK(complete.find("already complete") != std::string::npos);

  for (const std::string* message : {&absent, &stolen, &complete}) {
    CHECK(message->find(id.key()) == std::string::npos);
  }
}

TEST_CASE("memory_store: many callers on many keys complete every key exactly once", "[memory][concurrency]") {
  constexpr std::size_t threads_count = 8;
  constexpr std::size_t key_count = 64;
  constexpr int rounds = 4;
  idem::memory_store store(idem::memory_store_options{.shards = 4});
  std::vector<idem::identity> ids;
  for (std::size_t k = 0; k < key_count; ++k) ids.push_back(fresh_identity("stress"));

  struct tally {
    std::size_t acquired = 0;
    std::map<std::size_t, std::string> replayed_bodies;  // key index -> a body this thread saw
    std::size_t other = 0;
  };
  std::vector<tally> tallies(threads_count);
  {
    std::latch start(threads_count);
    std::vector<std::jthread> threads;
    for (std::size_t t = 0; t < threads_count; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        for (int round = 0; round < rounds; ++round) {
          for (std::size_t k = 0; k < key_count; ++k) {
            const std::size_t key = (k + t * 7) % key_count;  // threads walk the keys in different orders
            const auto result = store.try_acquire(make_context(ids[key], 5s, 5s));
            if (const auto* won = std::get_if<idem::acquired>(&result)) {
              ++tallies[t].acquired;
              store.complete(ids[key], won->token, sample_payload("key " + std::to_string(key)), 1h);
            } else if (const auto* dup = std::get_if<idem::duplicate>(&result)) {
              tallies[t].replayed_bodies[key] = dup->value.body;
            } else {
              ++tallies[t].other;
            }
          }
        }
      });
    }
  }
  std::size_t acquired = 0;
  for (const tally& t : tallies) {
    acquired += t.acquired;
    CHECK(t.other == 0);
    for (const auto& [key, body] : t.replayed_bodies) CHECK(body == "key " + std::to_string(key));
  }
  CHECK(acquired == key_count);
  CHECK(store.size() == key_count);
}
