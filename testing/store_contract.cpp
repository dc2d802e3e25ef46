// testing/store_contract.cpp — the behaviour every idem::store must show.
//
// A port of idempotency4j's IdempotencyStoreContract (the "ref N" comments give its numbering in
// shared/reference/idempotency4j.md §5.1) plus cases for promises our interface makes beyond it.
// Every case takes a store from make_store() and works on keys of its own, so a store's test
// executable may hand all cases one backend. Waiting for a lease or a ttl to expire is done by
// sleeping; everything else waits on events, or on store::waiting() for a caller to block. Upper time bounds are generous on purpose: they catch
// a store that hangs, never a slow machine.
#include <idem/testing/store_contract.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <latch>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include <idem/errors.hpp>

#include "support/eventually.hpp"

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using idem::contract::backend_expires_complete_records;
using idem::contract::backend_is_exclusive;
using idem::contract::fingerprint;
using idem::contract::fresh_identity;
using idem::contract::make_store;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::require_in_flight;
using idem::contract::require_lease_lost;
using idem::contract::require_mismatch;
using idem::contract::require_waiting;
using idem::contract::sample_payload;
using idem::contract::stopwatch;

// The reference's default context: ttl 1 h, lease = wait = 5 s, fingerprint "0"x64.
idem::context standard_context(const idem::identity& id) {
  idem::context ctx{.id = id, .ttl = 1h, .lease = 5s, .wait = 5s, .fingerprint = fingerprint('0')};
  ctx.validate();
  return ctx;
}

// The reference's contextFor(key, d): lease and wait both `d`, otherwise standard.
idem::context timed_context(const idem::identity& id, milliseconds d) {
  idem::context ctx{.id = id, .ttl = 1h, .lease = d, .wait = d, .fingerprint = fingerprint('0')};
  ctx.validate();
  return ctx;
}

// Any context, validated as try_acquire's precondition asks.
idem::context validated(idem::context ctx) {
  ctx.validate();
  return ctx;
}

// Lets the lease or ttl of a record expire.
void let_expire(milliseconds d) { std::this_thread::sleep_for(d); }

// How many of `n` complete records past their ttl purge_expired() still finds to delete: none
// when the backend forgets them by itself.
std::size_t purgeable_complete(std::size_t n) { return backend_expires_complete_records() ? 0 : n; }

// Checks a purge count: exactly `expected` when the backend belongs to this case alone, at least
// `expected` when other cases may leave expired records in it.
void check_purged(std::size_t purged, std::size_t expected) {
  INFO("purge_expired() returned " << purged << ", this case expects " << expected
                                   << (backend_is_exclusive() ? " exactly" : " at least (shared backend)"));
  if (backend_is_exclusive()) {
    CHECK(purged == expected);
  } else {
    CHECK(purged >= expected);
  }
}

// A caller's answer and when it came, for cases that check the timing of another thread.
struct timed_result {
  idem::acquire_result result;
  std::chrono::steady_clock::time_point returned_at;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Basics

// ref 1
TEST_CASE("contract: a new key is acquired", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("new");
  const idem::lease_token token = require_acquired(store->try_acquire(standard_context(id)));
  CHECK(token != idem::lease_token{});
}

// ref 2
TEST_CASE("contract: a completed key answers duplicate with the stored payload", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("completed");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, token, sample_payload(), 1h);

  const idem::duplicate dup = require_duplicate(store->try_acquire(standard_context(id)));
  CHECK(dup.value == sample_payload());
  CHECK(dup.value.type == "test/sample");
  CHECK(dup.value.body == "hello");
  CHECK(dup.value.attributes.at("status") == "200");
  CHECK(dup.value.attributes.at("requestId") == "abc-123");
}

// ref 3
TEST_CASE("contract: a released key can be acquired again under a new lease", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("released");
  const auto first = require_acquired(store->try_acquire(standard_context(id)));
  store->release(id, first);
  const auto second = require_acquired(store->try_acquire(standard_context(id)));
  CHECK(second != first);
}

// ref 4
TEST_CASE("contract: a completed key whose ttl has passed is acquired afresh", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("ttl-passed");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, token, sample_payload(), 1ms);
  let_expire(20ms);
  const auto again = require_acquired(store->try_acquire(timed_context(id, 10ms)));
  CHECK(again != token);
}

// ref 5
TEST_CASE("contract: a lease that expired without completion is stolen", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("stale");
  const auto holder = require_acquired(store->try_acquire(timed_context(id, 100ms)));
  let_expire(150ms);
  const auto thief = require_acquired(store->try_acquire(standard_context(id)));
  CHECK(thief != holder);
}

TEST_CASE("contract: only a claim of a lapsed lease reports that it took the record over", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("took-over");
  const auto took_over = [](const idem::acquire_result& answer) {
    (void)require_acquired(answer);
    return std::get<idem::acquired>(answer).took_over;
  };
  const idem::acquire_result fresh = store->try_acquire(standard_context(id));
  CHECK_FALSE(took_over(fresh));
  store->release(id, std::get<idem::acquired>(fresh).token);

  const idem::acquire_result after_release = store->try_acquire(standard_context(id));
  CHECK_FALSE(took_over(after_release));
  store->complete(id, std::get<idem::acquired>(after_release).token, sample_payload(), 1ms);
  let_expire(20ms);

  const idem::acquire_result after_ttl = store->try_acquire(timed_context(id, 100ms));
  CHECK_FALSE(took_over(after_ttl));
  let_expire(150ms);

  const idem::acquire_result stolen = store->try_acquire(standard_context(id));
  CHECK(took_over(stolen));
  CHECK(std::get<idem::acquired>(stolen).token != std::get<idem::acquired>(after_ttl).token);
}

// ref 6
TEST_CASE("contract: an expired lease is stolen by a caller with the same short durations", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("stale-same-durations");
  const auto holder = require_acquired(store->try_acquire(timed_context(id, 100ms)));
  let_expire(150ms);
  const auto thief = require_acquired(store->try_acquire(timed_context(id, 100ms)));
  CHECK(thief != holder);
}

// ref 7
TEST_CASE("contract: an old owner cannot complete after its lease was stolen", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("stolen");
  const auto old_owner = require_acquired(store->try_acquire(timed_context(id, 30ms)));
  let_expire(80ms);
  auto thief_ctx = standard_context(id);
  thief_ctx.fingerprint = fingerprint('a');
  const auto new_owner = require_acquired(store->try_acquire(thief_ctx));

  const std::string complete_message = require_lease_lost(
      "complete", id, [&] { store->complete(id, old_owner, sample_payload("old owner"), 1h); });
  CHECK(complete_message.find("lease") != std::string::npos);
  const std::string release_message =
      require_lease_lost("release", id, [&] { store->release(id, old_owner); });
  CHECK(release_message.find("lease") != std::string::npos);
  CHECK_FALSE(store->extend(id, old_owner, 5s));

  store->complete(id, new_owner, sample_payload("new owner"), 1h);
  const auto dup = require_duplicate(store->try_acquire(thief_ctx));
  CHECK(dup.value.body == "new owner");
}

// ref 8
TEST_CASE("contract: a duplicate blocks until the holder completes and then replays", "[contract][concurrency]") {
  auto store = make_store();
  const auto id = fresh_identity("blocking");
  const auto holder = require_acquired(store->try_acquire(standard_context(id)));

  idem::contract::background<timed_result> waiter([&] {
    auto result = store->try_acquire(standard_context(id));
    return timed_result{std::move(result), std::chrono::steady_clock::now()};
  });
  require_waiting(*store, 1);
  const auto completing_at = std::chrono::steady_clock::now();
  store->complete(id, holder, sample_payload(), 1h);

  const timed_result answer = waiter.result();
  const auto dup = require_duplicate(answer.result);
  CHECK(dup.value == sample_payload());
  CHECK(answer.returned_at >= completing_at);
}

// ref 9
TEST_CASE("contract: a duplicate whose wait elapses is answered in flight", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("wait-elapses");
  require_acquired(store->try_acquire(standard_context(id)));

  const stopwatch watch;
  const auto answer = require_in_flight(
      store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 200ms, .fingerprint = fingerprint('0')})));
  const milliseconds elapsed = watch.elapsed();
  INFO("answered after " << elapsed.count() << " ms");
  CHECK(elapsed >= 190ms);
  CHECK(elapsed <= 200ms + 4s);
  CHECK(answer.retry_after > 0ms);
}

// ref 10
TEST_CASE("contract: of concurrent callers exactly one acquires and the rest replay its payload",
          "[contract][concurrency]") {
  constexpr std::size_t callers = 20;
  auto store = make_store();
  const auto id = fresh_identity("concurrent");

  struct answer {
    std::optional<idem::acquire_result> result;
    std::exception_ptr error;
  };
  std::vector<answer> answers(callers);
  {
    std::latch start(callers);
    std::vector<std::jthread> threads;
    threads.reserve(callers);
    for (std::size_t i = 0; i < callers; ++i) {
      threads.emplace_back([&, i] {
        try {
          start.arrive_and_wait();
          auto result = store->try_acquire(standard_context(id));
          if (const auto* won = std::get_if<idem::acquired>(&result)) {
            store->complete(id, won->token, sample_payload("winner-" + std::to_string(i)), 1h);
          }
          answers[i].result = std::move(result);
        } catch (...) {
          answers[i].error = std::current_exception();
        }
      });
    }
  }  // joins every caller

  std::optional<std::size_t> winner;
  std::size_t acquired = 0;
  for (std::size_t i = 0; i < callers; ++i) {
    if (answers[i].error) std::rethrow_exception(answers[i].error);
    REQUIRE(answers[i].result.has_value());
    if (std::holds_alternative<idem::acquired>(*answers[i].result)) {
      ++acquired;
      winner = i;
    }
  }
  REQUIRE(acquired == 1);
  const auto winning_payload = sample_payload("winner-" + std::to_string(*winner));
  for (std::size_t i = 0; i < callers; ++i) {
    if (i == *winner) continue;
    INFO("caller " << i);
    CHECK(require_duplicate(*answers[i].result).value == winning_payload);
  }
}

// ref 11
TEST_CASE("contract: different keys are acquired independently", "[contract][concurrency]") {
  auto store = make_store();
  const auto first = fresh_identity("independent-1");
  const auto second = fresh_identity("independent-2");
  std::latch start(2);
  idem::contract::background<idem::acquire_result> one([&] {
    start.arrive_and_wait();
    return store->try_acquire(standard_context(first));
  });
  idem::contract::background<idem::acquire_result> two([&] {
    start.arrive_and_wait();
    return store->try_acquire(standard_context(second));
  });
  require_acquired(one.result());
  require_acquired(two.result());
}

// ref 12
TEST_CASE("contract: a released key can be retried, completed and then replayed", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("retry");
  const auto failed_attempt = require_acquired(store->try_acquire(standard_context(id)));
  store->release(id, failed_attempt);
  const auto second_attempt = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, second_attempt, sample_payload(), 1h);
  CHECK(require_duplicate(store->try_acquire(standard_context(id))).value == sample_payload());
}

// ---------------------------------------------------------------------------------------------
// Heartbeat (extend)

// ref 13
TEST_CASE("contract: an extended lease is not stolen", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("extended");
  const auto holder = require_acquired(store->try_acquire(timed_context(id, 100ms)));
  CHECK(store->extend(id, holder, 30s));
  let_expire(150ms);  // past the original lease
  const auto answer = require_in_flight(store->try_acquire(timed_context(id, 100ms)));
  INFO("retry_after " << answer.retry_after.count() << " ms");
  CHECK(answer.retry_after > 10s);
  CHECK(answer.retry_after <= 30s);
}

// ref 14
TEST_CASE("contract: extending an unknown key is a silent no-op", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("extend-unknown");
  CHECK_FALSE(store->extend(id, idem::lease_token::generate(), 5s));
  require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 0ms})));
}

// ref 15
TEST_CASE("contract: extending a completed key is a silent no-op", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("extend-completed");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, token, sample_payload(), 1h);
  CHECK_FALSE(store->extend(id, token, 5s));
  CHECK(require_duplicate(store->try_acquire(standard_context(id))).value == sample_payload());
}

// ref 16
TEST_CASE("contract: a completed key within its ttl answers duplicate on every call", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("within-ttl");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, token, sample_payload(), 1h);
  for (int i = 0; i < 3; ++i) {
    INFO("replay " << i);
    CHECK(require_duplicate(store->try_acquire(standard_context(id))).value == sample_payload());
  }
}

// ---------------------------------------------------------------------------------------------
// Error contract

// ref 17
TEST_CASE("contract: completing an unknown key throws lease_lost_error", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("complete-unknown");
  require_lease_lost("complete", id,
                     [&] { store->complete(id, idem::lease_token::generate(), sample_payload(), 1h); });
}

// ref 18
TEST_CASE("contract: completing a released key throws lease_lost_error", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("complete-released");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->release(id, token);
  require_lease_lost("complete", id, [&] { store->complete(id, token, sample_payload(), 1h); });
}

// ref 19
TEST_CASE("contract: releasing an unknown key throws lease_lost_error", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("release-unknown");
  require_lease_lost("release", id, [&] { store->release(id, idem::lease_token::generate()); });
}

// ref 20
TEST_CASE("contract: completing a completed key throws lease_lost_error", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("complete-twice");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, token, sample_payload("first"), 1h);
  require_lease_lost("complete", id, [&] { store->complete(id, token, sample_payload("second"), 1h); });
  CHECK(require_duplicate(store->try_acquire(standard_context(id))).value.body == "first");
}

// ref 21
TEST_CASE("contract: releasing a completed key throws lease_lost_error", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("release-completed");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, token, sample_payload(), 1h);
  require_lease_lost("release", id, [&] { store->release(id, token); });
  CHECK(require_duplicate(store->try_acquire(standard_context(id))).value == sample_payload());
}

// ref 22
TEST_CASE("contract: a full lifecycle reacquires after ttl expiry and replays the second result", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("lifecycle");
  const auto first = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, first, sample_payload("generation 1"), 1ms);
  let_expire(20ms);
  const auto second = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, second, sample_payload("generation 2"), 1h);
  CHECK(require_duplicate(store->try_acquire(standard_context(id))).value.body == "generation 2");
}

// ---------------------------------------------------------------------------------------------
// Release semantics

// ref 23
TEST_CASE("contract: extending a released key is a silent no-op", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("extend-released");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->release(id, token);
  CHECK_FALSE(store->extend(id, token, 5s));
  // The extension did not bring the record back.
  require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 0ms})));
}

// ref 24
TEST_CASE("contract: a released record leaves nothing behind for purge", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("release-deletes");
  const auto token =
      require_acquired(store->try_acquire(validated({.id = id, .ttl = 50ms, .lease = 5s, .wait = 5s})));
  store->release(id, token);
  let_expire(150ms);
  const std::size_t purged = store->purge_expired();
  if (backend_is_exclusive()) {
    CHECK(purged == 0);  // release deleted the record rather than relabelling it
  }
  require_acquired(store->try_acquire(standard_context(id)));
}

// ref 25
TEST_CASE("contract: releasing with a wrong token throws and the owner can still release", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("wrong-token");
  const auto owner = require_acquired(store->try_acquire(standard_context(id)));
  require_lease_lost("release", id, [&] { store->release(id, idem::lease_token::generate()); });
  CHECK_NOTHROW(store->release(id, owner));
  require_acquired(store->try_acquire(standard_context(id)));
}

// ref 26
TEST_CASE("contract: a reacquired key has a fresh lease and the old token cannot release it", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fresh-lease");
  const auto old_token = require_acquired(store->try_acquire(standard_context(id)));
  store->release(id, old_token);
  const auto new_token = require_acquired(store->try_acquire(standard_context(id)));
  CHECK(new_token != old_token);
  require_lease_lost("release", id, [&] { store->release(id, old_token); });
  // The new lease still owns the record.
  store->complete(id, new_token, sample_payload(), 1h);
  require_duplicate(store->try_acquire(standard_context(id)));
}

// ref 27
TEST_CASE("contract: purge deletes only expired records nobody holds", "[contract]") {
  auto store = make_store();
  // Complete, ttl passed: garbage.
  const auto expired_complete = fresh_identity("purge-expired-complete");
  store->complete(expired_complete, require_acquired(store->try_acquire(standard_context(expired_complete))),
                  sample_payload(), 1ms);
  // Complete, ttl live: kept.
  const auto live_complete = fresh_identity("purge-live-complete");
  store->complete(live_complete, require_acquired(store->try_acquire(standard_context(live_complete))),
                  sample_payload("live"), 1h);
  // In progress, lease expired, ttl live: stealable but not garbage.
  const auto lapsed_holder = fresh_identity("purge-lapsed-holder");
  const auto lapsed_token =
      require_acquired(store->try_acquire(validated({.id = lapsed_holder, .ttl = 1h, .lease = 20ms, .wait = 0ms})));
  // In progress, ttl passed, lease live: held, so kept.
  const auto held = fresh_identity("purge-held");
  require_acquired(store->try_acquire(validated({.id = held, .ttl = 10ms, .lease = 30s, .wait = 0ms})));

  let_expire(100ms);
  check_purged(store->purge_expired(), purgeable_complete(1));

  CHECK(require_duplicate(store->try_acquire(standard_context(live_complete))).value.body == "live");
  require_in_flight(store->try_acquire(validated({.id = held, .ttl = 1h, .lease = 5s, .wait = 0ms})));
  // The lapsed record is still there: its holder, never displaced, can still complete it.
  CHECK_NOTHROW(store->complete(lapsed_holder, lapsed_token, sample_payload("lapsed"), 1h));
  CHECK(require_duplicate(store->try_acquire(standard_context(lapsed_holder))).value.body == "lapsed");
  // The expired one is gone.
  require_acquired(store->try_acquire(standard_context(expired_complete)));
}

// ref 28
TEST_CASE("contract: releasing a released key throws lease_lost_error", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("release-twice");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->release(id, token);
  require_lease_lost("release", id, [&] { store->release(id, token); });
}

// ref 29
TEST_CASE("contract: a caller under acquire and release contention returns within its wait budget",
          "[contract][concurrency]") {
  constexpr std::size_t contenders = 20;
  auto store = make_store();
  const auto id = fresh_identity("contention");
  const auto contender_ctx = validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 0ms});

  std::atomic<std::size_t> failures{0};
  std::latch running(contenders);
  std::optional<idem::acquire_result> victim;
  milliseconds elapsed{0};
  {
    std::vector<std::jthread> threads;
    threads.reserve(contenders);
    for (std::size_t i = 0; i < contenders; ++i) {
      threads.emplace_back([&](std::stop_token stop) {
        running.count_down();
        while (!stop.stop_requested()) {
          try {
            const auto result = store->try_acquire(contender_ctx);
            if (const auto* won = std::get_if<idem::acquired>(&result)) store->release(id, won->token);
          } catch (...) {
            failures.fetch_add(1);
          }
        }
      });
    }
    running.wait();
    const stopwatch watch;
    victim = store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 200ms}));
    elapsed = watch.elapsed();
    if (const auto* won = std::get_if<idem::acquired>(&*victim)) store->release(id, won->token);
  }  // requests stop and joins every contender

  INFO("the victim answered " << idem::contract::describe(*victim) << " after " << elapsed.count() << " ms");
  CHECK((std::holds_alternative<idem::acquired>(*victim) || std::holds_alternative<idem::in_flight>(*victim)));
  CHECK(elapsed <= 200ms + 10s);
  CHECK(failures.load() == 0);
}

// ref 30
TEST_CASE("contract: the holder acquiring its own key again is answered in flight", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("no-reentrancy");
  require_acquired(store->try_acquire(standard_context(id)));
  require_in_flight(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 100ms,
                                                  .fingerprint = fingerprint('0')})));
}

// ---------------------------------------------------------------------------------------------
// Lease versus wait

// ref 31
TEST_CASE("contract: a zero wait on a held key answers in flight at once", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("zero-wait");
  require_acquired(store->try_acquire(standard_context(id)));
  const stopwatch watch;
  require_in_flight(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 0ms})));
  const milliseconds elapsed = watch.elapsed();
  INFO("answered after " << elapsed.count() << " ms");
  CHECK(elapsed < 3s);
}

// Beyond the reference: store::try_acquire_at_once, what an asynchronous call asks first.
TEST_CASE("contract: an answer at once is try_acquire's own, or none, and never waits for a holder", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("at-once");
  const idem::context waits = standard_context(id);  // a 5 s wait
  std::optional<idem::acquire_result> claim = store->try_acquire_at_once(waits);
  // Only a store whose operations stay in this process grants a claim at once.
  if (claim) CHECK(store->in_process());
  const idem::lease_token token = require_acquired(claim ? *claim : store->try_acquire(waits));

  const stopwatch watch;
  CHECK_FALSE(store->try_acquire_at_once(waits).has_value());  // it would wait for the holder
  const std::optional<idem::acquire_result> zero_wait =
      store->try_acquire_at_once(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 0ms}));
  if (zero_wait) require_in_flight(*zero_wait);
  INFO("answered after " << watch.elapsed().count() << " ms");
  CHECK(watch.elapsed() < 3s);
  CHECK(store->waiting() == 0);

  store->complete(id, token, sample_payload(), 1h);
  const std::optional<idem::acquire_result> replay = store->try_acquire_at_once(waits);
  if (store->in_process()) CHECK(replay.has_value());
  if (replay) CHECK(require_duplicate(*replay).value == sample_payload());
}

// ref 32
TEST_CASE("contract: retry_after is the remaining lease of the holder and not the wait of the caller",
          "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("retry-after");
  require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 30s, .wait = 5s})));
  const auto answer =
      require_in_flight(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 100ms})));
  INFO("retry_after " << answer.retry_after.count() << " ms");
  CHECK(answer.retry_after > 20s);
  CHECK(answer.retry_after <= 30s);
}

// ref 33
TEST_CASE("contract: a wait longer than the lease of the holder ends in a steal", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("wait-outlasts-lease");
  const auto holder =
      require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 200ms, .wait = 5s})));
  const auto thief =
      require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 10s})));
  CHECK(thief != holder);
}

// ref 34
TEST_CASE("contract: retry_after is never negative", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("retry-after-sign");
  require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s})));
  for (const milliseconds wait : {0ms, 50ms}) {
    INFO("wait " << wait.count() << " ms");
    const auto answer =
        require_in_flight(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = wait})));
    CHECK(answer.retry_after >= 0ms);
    CHECK(answer.retry_after <= 5s);
  }
}

// ---------------------------------------------------------------------------------------------
// Purge

// ref 35
TEST_CASE("contract: purge deletes an abandoned record so its key can be acquired again", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("purge-abandoned");
  require_acquired(store->try_acquire(validated({.id = id, .ttl = 10ms, .lease = 2ms, .wait = 0ms})));
  let_expire(50ms);
  check_purged(store->purge_expired(), 1);
  require_acquired(store->try_acquire(standard_context(id)));
}

// ref 36
TEST_CASE("contract: purge keeps a completed record within its ttl", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("purge-keeps-live");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, token, sample_payload(), 10min);
  const std::size_t purged = store->purge_expired();
  if (backend_is_exclusive()) CHECK(purged == 0);
  CHECK(require_duplicate(store->try_acquire(standard_context(id))).value == sample_payload());
}

// ref 37
TEST_CASE("contract: purge deletes a completed record past its ttl", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("purge-expired-complete");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  store->complete(id, token, sample_payload(), 1ms);
  let_expire(20ms);
  check_purged(store->purge_expired(), purgeable_complete(1));
  require_acquired(store->try_acquire(standard_context(id)));
}

// ref 38
TEST_CASE("contract: purge keeps an in-progress record whose lease expired but whose ttl has not",
          "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("purge-keeps-lapsed");
  const auto token =
      require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 20ms, .wait = 0ms})));
  let_expire(60ms);
  const std::size_t purged = store->purge_expired();
  if (backend_is_exclusive()) CHECK(purged == 0);
  // Still there: the holder, never displaced, completes it.
  CHECK_NOTHROW(store->complete(id, token, sample_payload(), 1h));
  require_duplicate(store->try_acquire(standard_context(id)));
}

// ref 39
TEST_CASE("contract: purge deletes an in-progress record whose lease and ttl both expired", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("purge-stale");
  const auto token =
      require_acquired(store->try_acquire(validated({.id = id, .ttl = 20ms, .lease = 20ms, .wait = 0ms})));
  let_expire(60ms);
  check_purged(store->purge_expired(), 1);
  // Gone: the former holder has nothing left to complete.
  require_lease_lost("complete", id, [&] { store->complete(id, token, sample_payload(), 1h); });
}

// ref 40
TEST_CASE("contract: purge with nothing expired deletes nothing", "[contract]") {
  auto store = make_store();
  const auto complete_id = fresh_identity("purge-nothing-complete");
  store->complete(complete_id, require_acquired(store->try_acquire(standard_context(complete_id))),
                  sample_payload(), 1h);
  const auto held_id = fresh_identity("purge-nothing-held");
  require_acquired(store->try_acquire(standard_context(held_id)));

  const std::size_t purged = store->purge_expired();
  if (backend_is_exclusive()) CHECK(purged == 0);
  require_duplicate(store->try_acquire(standard_context(complete_id)));
  require_in_flight(store->try_acquire(validated({.id = held_id, .ttl = 1h, .lease = 5s, .wait = 0ms})));
}

// ---------------------------------------------------------------------------------------------
// Scope isolation

// ref 41
TEST_CASE("contract: the same key in two scopes is acquired in both", "[contract]") {
  auto store = make_store();
  const auto here = fresh_identity("same-key");
  const idem::identity there(std::string(idem::contract::other_scope), here.key());
  const auto first = require_acquired(store->try_acquire(standard_context(here)));
  const auto second = require_acquired(store->try_acquire(validated({.id = there, .ttl = 1h, .lease = 5s, .wait = 0ms})));
  CHECK(first != second);
}

// ref 42
TEST_CASE("contract: completing in one scope leaves the same key free in another", "[contract]") {
  auto store = make_store();
  const auto here = fresh_identity("complete-one-scope");
  const idem::identity there(std::string(idem::contract::other_scope), here.key());
  store->complete(here, require_acquired(store->try_acquire(standard_context(here))), sample_payload(), 1h);
  require_acquired(store->try_acquire(standard_context(there)));
}

// ref 43
TEST_CASE("contract: releasing in one scope leaves the same key in another untouched", "[contract]") {
  auto store = make_store();
  const auto here = fresh_identity("release-one-scope");
  const idem::identity there(std::string(idem::contract::other_scope), here.key());
  const auto here_token = require_acquired(store->try_acquire(standard_context(here)));
  const auto there_token = require_acquired(store->try_acquire(standard_context(there)));
  store->release(here, here_token);
  require_in_flight(store->try_acquire(validated({.id = there, .ttl = 1h, .lease = 5s, .wait = 0ms})));
  store->complete(there, there_token, sample_payload("there"), 1h);
  CHECK(require_duplicate(store->try_acquire(standard_context(there))).value.body == "there");
}

// ---------------------------------------------------------------------------------------------
// Fingerprints

namespace {

// Completes a fresh record created with `stored` and asks again with `incoming`.
idem::acquire_result replay_with(idem::store& store, const idem::identity& id, std::optional<std::string> stored,
                                 std::optional<std::string> incoming) {
  const auto token = require_acquired(
      store.try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s, .fingerprint = std::move(stored)})));
  store.complete(id, token, sample_payload(), 1h);
  return store.try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s, .fingerprint = std::move(incoming)}));
}

}  // namespace

// ref 44
TEST_CASE("contract: the same key with the same fingerprint answers duplicate", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fingerprint-same");
  CHECK(require_duplicate(replay_with(*store, id, fingerprint('0'), fingerprint('0'))).value == sample_payload());
}

// ref 45
TEST_CASE("contract: the same key with another fingerprint answers a mismatch naming both", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fingerprint-other");
  const auto mismatch = require_mismatch(replay_with(*store, id, fingerprint('a'), fingerprint('b')));
  CHECK(mismatch.stored == fingerprint('a'));
  CHECK(mismatch.received == fingerprint('b'));
}

// ref 46
TEST_CASE("contract: a released key is acquired by a caller with another fingerprint", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fingerprint-after-release");
  const auto token = require_acquired(
      store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s, .fingerprint = fingerprint('a')})));
  store->release(id, token);
  require_acquired(
      store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s, .fingerprint = fingerprint('b')})));
}

// ref 47
TEST_CASE("contract: after a release the fingerprint of the completing caller is the one stored", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fingerprint-replaced");
  const auto with_a = [&] {
    return validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s, .fingerprint = fingerprint('a')});
  };
  const auto with_b = [&] {
    return validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s, .fingerprint = fingerprint('b')});
  };
  store->release(id, require_acquired(store->try_acquire(with_a())));
  store->complete(id, require_acquired(store->try_acquire(with_b())), sample_payload(), 1h);
  const auto mismatch = require_mismatch(store->try_acquire(with_a()));
  CHECK(mismatch.stored == fingerprint('b'));
  CHECK(mismatch.received == fingerprint('a'));
  require_duplicate(store->try_acquire(with_b()));
}

// ref 48
TEST_CASE("contract: no fingerprint on either side answers duplicate", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fingerprint-neither");
  require_duplicate(replay_with(*store, id, std::nullopt, std::nullopt));
}

// ref 49
TEST_CASE("contract: a fingerprint only on the incoming call answers duplicate", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fingerprint-incoming-only");
  require_duplicate(replay_with(*store, id, std::nullopt, fingerprint('a')));
}

// ref 50
TEST_CASE("contract: a fingerprint only on the stored record answers duplicate", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fingerprint-stored-only");
  require_duplicate(replay_with(*store, id, fingerprint('a'), std::nullopt));
}

// ref 51
TEST_CASE("contract: two different fingerprints answer a mismatch", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fingerprint-both-differ");
  const auto mismatch = require_mismatch(replay_with(*store, id, fingerprint('b'), fingerprint('0')));
  CHECK(mismatch.stored == fingerprint('b'));
  CHECK(mismatch.received == fingerprint('0'));
}

// ref 52
TEST_CASE("contract: fingerprints never change the answer for a held key", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("fingerprint-in-flight");
  require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s})));
  require_in_flight(
      store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 100ms, .fingerprint = fingerprint('a')})));
}

// ---------------------------------------------------------------------------------------------
// Payload round trip

// ref 53
TEST_CASE("contract: attributes are replayed verbatim", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("attributes");
  idem::payload published;
  published.type = "messaging/published";
  published.attributes = {{"messageId", "m-42"}, {"topic", "orders.placed"}, {"empty", ""},
                          {"with spaces", "a = b; c"}, {"unicode", "\xc3\xa9t\xc3\xa9"}};
  store->complete(id, require_acquired(store->try_acquire(standard_context(id))), published, 1h);
  const auto dup = require_duplicate(store->try_acquire(standard_context(id)));
  CHECK(dup.value == published);
  CHECK(dup.value.body.empty());
  REQUIRE(dup.value.attributes.count("empty") == 1);
  CHECK(dup.value.attributes.at("empty").empty());
}

// ref 54
TEST_CASE("contract: the none payload is replayed as none", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("none");
  store->complete(id, require_acquired(store->try_acquire(standard_context(id))), idem::payload::none(), 1h);
  const auto dup = require_duplicate(store->try_acquire(standard_context(id)));
  CHECK(dup.value.is_none());
  CHECK(dup.value == idem::payload::none());
}

// ref 55
TEST_CASE("contract: the none payload without fingerprints round-trips", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("none-no-fingerprint");
  const auto plain = validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s});
  store->complete(id, require_acquired(store->try_acquire(plain)), idem::payload::none(), 1h);
  CHECK(require_duplicate(store->try_acquire(plain)).value == idem::payload::none());
}

// ref 56
TEST_CASE("contract: a released record of a void action can be acquired again", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("none-released");
  const auto plain = validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 5s});
  store->release(id, require_acquired(store->try_acquire(plain)));
  store->complete(id, require_acquired(store->try_acquire(plain)), idem::payload::none(), 1h);
  CHECK(require_duplicate(store->try_acquire(plain)).value.is_none());
}

// ref 57
TEST_CASE("contract: completed_at is the time of completion", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("completed-at");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  const auto before = std::chrono::system_clock::now();
  store->complete(id, token, sample_payload(), 1h);
  const auto after = std::chrono::system_clock::now();
  const auto completed_at = require_duplicate(store->try_acquire(standard_context(id))).completed_at;
  CHECK(completed_at >= before - 5s);
  CHECK(completed_at <= after + 5s);
}

// ref 58
TEST_CASE("contract: an empty body with a real type stays distinct from none", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("empty-body");
  idem::payload empty;
  empty.type = "test/sample";
  store->complete(id, require_acquired(store->try_acquire(standard_context(id))), empty, 1h);
  const auto dup = require_duplicate(store->try_acquire(standard_context(id)));
  CHECK(dup.value.type == "test/sample");
  CHECK(dup.value.body.empty());
  CHECK(dup.value.attributes.empty());
  CHECK_FALSE(dup.value.is_none());
}

// ref 59
TEST_CASE("contract: a large body round-trips intact", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("large-body");
  idem::payload large;
  large.type = "application/octet-stream";
  large.body.resize(std::size_t{1} << 20);
  std::mt19937_64 bits(std::random_device{}());
  for (char& byte : large.body) byte = static_cast<char>(bits() & 0xff);
  store->complete(id, require_acquired(store->try_acquire(standard_context(id))), large, 1h);
  const auto dup = require_duplicate(store->try_acquire(standard_context(id)));
  CHECK(dup.value.body.size() == large.body.size());
  CHECK(dup.value.body == large.body);
  CHECK(dup.value.type == large.type);
}

// ---------------------------------------------------------------------------------------------
// Beyond the reference: promises of idem::store the reference does not test

TEST_CASE("contract: a body with NUL bytes round-trips byte for byte", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("nul-bytes");
  idem::payload binary;
  binary.type = "application/octet-stream";
  for (int i = 0; i < 256; ++i) binary.body.push_back(static_cast<char>(i));
  binary.body.append(std::string("\0\0tail\0", 7));
  store->complete(id, require_acquired(store->try_acquire(standard_context(id))), binary, 1h);
  const auto dup = require_duplicate(store->try_acquire(standard_context(id)));
  CHECK(dup.value.body.size() == binary.body.size());
  CHECK(dup.value.body == binary.body);
}

TEST_CASE("contract: completed_at is the system clock at completion and the same on every replay",
          "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("completed-at-stable");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  const auto before = std::chrono::system_clock::now();
  store->complete(id, token, sample_payload(), 1h);
  const auto after = std::chrono::system_clock::now();
  const auto first = require_duplicate(store->try_acquire(standard_context(id))).completed_at;
  std::this_thread::sleep_for(20ms);
  const auto second = require_duplicate(store->try_acquire(standard_context(id))).completed_at;
  // A store clock on this host; one second for a database clock that truncates or rounds.
  CHECK(first >= before - 1s);
  CHECK(first <= after + 1s);
  CHECK(second == first);
}

TEST_CASE("contract: a waiter is woken by a release and acquires the key", "[contract][concurrency]") {
  auto store = make_store();
  const auto id = fresh_identity("woken-by-release");
  const auto holder = require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 60s, .wait = 0ms})));

  idem::contract::background<timed_result> waiter([&] {
    auto result = store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 60s, .wait = 30s}));
    return timed_result{std::move(result), std::chrono::steady_clock::now()};
  });
  require_waiting(*store, 1);
  const auto releasing_at = std::chrono::steady_clock::now();
  store->release(id, holder);

  // The holder's lease (60 s) outlasts the wait (30 s): only the release can let the waiter in,
  // and it must be told well before its wait runs out.
  REQUIRE(waiter.finished_within(15s));
  const timed_result answer = waiter.result();
  const auto token = require_acquired(answer.result);
  CHECK(token != holder);
  CHECK(answer.returned_at >= releasing_at);
}

TEST_CASE("contract: a holder whose lease lapsed but was not taken over can still complete", "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("lapsed-completes");
  const auto token =
      require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 20ms, .wait = 0ms})));
  let_expire(60ms);
  CHECK_NOTHROW(store->complete(id, token, sample_payload("late"), 1h));
  CHECK(require_duplicate(store->try_acquire(standard_context(id))).value.body == "late");
}

TEST_CASE("contract: scope and key never run into each other", "[contract]") {
  auto store = make_store();
  const std::string suffix = idem::contract::unique_key("boundary");
  // Concatenated without a separator both would read "ContractScope.ab<suffix>".
  const idem::identity left("ContractScope.ab", suffix);
  const idem::identity right("ContractScope.a", "b" + suffix);
  const auto left_token = require_acquired(store->try_acquire(standard_context(left)));
  const auto right_token = require_acquired(store->try_acquire(standard_context(right)));
  store->complete(left, left_token, sample_payload("left"), 1h);
  store->complete(right, right_token, sample_payload("right"), 1h);
  CHECK(require_duplicate(store->try_acquire(standard_context(left))).value.body == "left");
  CHECK(require_duplicate(store->try_acquire(standard_context(right))).value.body == "right");
}

TEST_CASE("contract: keys that differ only after a NUL byte or a colon are distinct records", "[contract]") {
  auto store = make_store();
  const std::string base = idem::contract::unique_key("binary-key");
  const idem::identity nul_a(std::string(idem::contract::contract_scope), base + std::string("\0a", 2));
  const idem::identity nul_b(std::string(idem::contract::contract_scope), base + std::string("\0b", 2));
  const idem::identity colon_a(std::string(idem::contract::contract_scope), base + ":a");
  const idem::identity colon_b(std::string(idem::contract::contract_scope), base + ":b");
  for (const idem::identity* id : {&nul_a, &nul_b, &colon_a, &colon_b}) {
    const auto token = require_acquired(store->try_acquire(standard_context(*id)));
    store->complete(*id, token, sample_payload(id->key()), 1h);
  }
  for (const idem::identity* id : {&nul_a, &nul_b, &colon_a, &colon_b}) {
    CHECK(require_duplicate(store->try_acquire(standard_context(*id))).value.body == id->key());
  }
}

// ---------------------------------------------------------------------------------------------
// waiting()

TEST_CASE("contract: waiting() is 0 on an idle store and a look-once never counts", "[contract]") {
  auto store = make_store();
  CHECK(store->waiting() == 0);
  const auto id = fresh_identity("waiting-idle");
  const auto token = require_acquired(store->try_acquire(standard_context(id)));
  CHECK(store->waiting() == 0);
  require_in_flight(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 0ms})));
  CHECK(store->waiting() == 0);
  store->complete(id, token, sample_payload(), 1h);
  require_duplicate(store->try_acquire(standard_context(id)));
  CHECK(store->waiting() == 0);
}

TEST_CASE("contract: waiting() counts a blocked duplicate until it returns with the replay",
          "[contract][concurrency]") {
  auto store = make_store();
  const auto id = fresh_identity("waiting-one");
  const auto holder = require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 60s, .wait = 0ms})));

  // The holder's lease (60 s) outlasts the wait (30 s): only the completion lets the waiter go.
  idem::contract::background<idem::acquire_result> waiter(
      [&] { return store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 60s, .wait = 30s})); });
  require_waiting(*store, 1);
  CHECK_FALSE(waiter.finished_within(0ms));  // counted means still inside try_acquire
  store->complete(id, holder, sample_payload("counted"), 1h);

  REQUIRE(waiter.finished_within(15s));
  CHECK(require_duplicate(waiter.result()).value == sample_payload("counted"));
  CHECK(store->waiting() == 0);
}

TEST_CASE("contract: waiting() counts every blocked duplicate of a record", "[contract][concurrency]") {
  auto store = make_store();
  const auto id = fresh_identity("waiting-two");
  const auto holder = require_acquired(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 60s, .wait = 0ms})));
  const auto waiting_context = validated({.id = id, .ttl = 1h, .lease = 60s, .wait = 30s});
  idem::contract::background<idem::acquire_result> first([&] { return store->try_acquire(waiting_context); });
  idem::contract::background<idem::acquire_result> second([&] { return store->try_acquire(waiting_context); });
  require_waiting(*store, 2);
  store->release(id, holder);

  // One of them acquires the released key; the other keeps waiting for it (counted again as one).
  REQUIRE(idem::test::eventually([&] { return first.finished_within(0ms) || second.finished_within(0ms); }, 15s));
  const bool first_won = first.finished_within(0ms);
  const idem::lease_token winner = require_acquired(first_won ? first.result() : second.result());
  require_waiting(*store, 1);
  store->complete(id, winner, sample_payload("second"), 1h);
  auto& loser = first_won ? second : first;
  REQUIRE(loser.finished_within(15s));
  CHECK(require_duplicate(loser.result()).value == sample_payload("second"));
  CHECK(store->waiting() == 0);
}

// ---------------------------------------------------------------------------------------------
// Durations at the end of the range: deadlines and expiries saturate instead of overflowing

TEST_CASE("contract: a duplicate waiting milliseconds::max() gets the replay when the holder completes",
          "[contract][concurrency]") {
  auto store = make_store();
  const auto id = fresh_identity("wait-max");
  const auto holder = require_acquired(store->try_acquire(standard_context(id)));

  idem::contract::background<idem::acquire_result> waiter([&] {
    return store->try_acquire(
        validated({.id = id, .ttl = 1h, .lease = 5s, .wait = milliseconds::max(), .fingerprint = fingerprint('0')}));
  });
  require_waiting(*store, 1);
  store->complete(id, holder, sample_payload("after the longest wait"), 1h);
  REQUIRE(waiter.finished_within(15s));
  CHECK(require_duplicate(waiter.result()).value == sample_payload("after the longest wait"));
}

TEST_CASE("contract: ttl, lease and wait of milliseconds::max() acquire, hold, complete and replay",
          "[contract]") {
  auto store = make_store();
  const auto id = fresh_identity("durations-max");
  const auto forever =
      validated({.id = id, .ttl = milliseconds::max(), .lease = milliseconds::max(), .wait = milliseconds::max()});
  const auto token = require_acquired(store->try_acquire(forever));

  // Held for as long as a lease can be: a look-once is in flight with a positive retry_after.
  const auto busy = require_in_flight(store->try_acquire(validated({.id = id, .ttl = 1h, .lease = 5s, .wait = 0ms})));
  CHECK(busy.retry_after > 24h);
  CHECK(store->extend(id, token, milliseconds::max()));
  const std::size_t purged_held = store->purge_expired();
  if (backend_is_exclusive()) CHECK(purged_held == 0);

  store->complete(id, token, sample_payload("forever"), milliseconds::max());
  const std::size_t purged_complete = store->purge_expired();
  if (backend_is_exclusive()) CHECK(purged_complete == 0);
  CHECK(require_duplicate(store->try_acquire(forever)).value == sample_payload("forever"));
}

// ---------------------------------------------------------------------------------------------
// Purge and the longest valid records

TEST_CASE("contract: purge deletes expired records with the longest scope and fingerprint", "[contract]") {
  auto store = make_store();
  std::string scope = "LongestScope.";
  scope.resize(idem::max_scope_length, 'x');
  const std::string long_fingerprint(idem::max_fingerprint_length, 'f');
  std::string other_fingerprint(idem::max_fingerprint_length, 'f');
  other_fingerprint.back() = 'e';
  const auto with = [&](const idem::identity& id, milliseconds ttl, milliseconds lease, const std::string& fp) {
    return validated({.id = id, .ttl = ttl, .lease = lease, .wait = 0ms, .fingerprint = fp});
  };

  // Live: replays with its whole fingerprint, which a fingerprint differing in the last digit misses.
  const auto live = fresh_identity("longest-live", scope);
  store->complete(live, require_acquired(store->try_acquire(with(live, 1h, 5s, long_fingerprint))),
                  sample_payload("live"), 1h);
  CHECK(require_duplicate(store->try_acquire(with(live, 1h, 5s, long_fingerprint))).value == sample_payload("live"));
  const auto mismatch = require_mismatch(store->try_acquire(with(live, 1h, 5s, other_fingerprint)));
  CHECK(mismatch.stored == long_fingerprint);
  CHECK(mismatch.received == other_fingerprint);

  // Expired: a complete record past its ttl, and an abandoned one past its lease and ttl.
  const auto complete = fresh_identity("longest-complete", scope);
  store->complete(complete, require_acquired(store->try_acquire(with(complete, 1h, 5s, long_fingerprint))),
                  sample_payload("expired"), 1ms);
  const auto abandoned = fresh_identity("longest-abandoned", scope);
  const auto abandoned_token = require_acquired(store->try_acquire(with(abandoned, 20ms, 20ms, long_fingerprint)));
  let_expire(60ms);

  check_purged(store->purge_expired(), 1 + purgeable_complete(1));
  // The abandoned record is gone (not merely lapsed: its holder could otherwise still complete it).
  require_lease_lost("complete", abandoned, [&] { store->complete(abandoned, abandoned_token, sample_payload(), 1h); });
  CHECK(require_duplicate(store->try_acquire(with(live, 1h, 5s, long_fingerprint))).value == sample_payload("live"));
  require_acquired(store->try_acquire(with(complete, 1h, 5s, long_fingerprint)));
}
