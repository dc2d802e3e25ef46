// testing/admin_contract.cpp — the administration part of the store contract (idem-admin's
// operations, <idem/store_admin.hpp>). A store that does not offer administration must say so and
// refuse each operation with configuration_error; one that does must pass every case below.
#include <idem/testing/store_contract.hpp>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <idem/errors.hpp>

namespace {

using namespace std::chrono_literals;
using idem::admin_release;
using idem::record_state;
using idem::contract::fingerprint;
using idem::contract::fresh_identity;
using idem::contract::make_store;
using idem::contract::require_acquired;
using idem::contract::require_duplicate;
using idem::contract::sample_payload;

idem::context held_for(const idem::identity& id, std::chrono::milliseconds lease, bool with_fingerprint = false) {
  idem::context ctx{.id = id, .ttl = 1h, .lease = lease, .wait = 0ms};
  if (with_fingerprint) ctx.fingerprint = fingerprint('a');
  ctx.validate();
  return ctx;
}

// A scope of the case's own, so that a listing sees its records only.
std::string own_scope() {
  std::random_device random;
  return "AdminContract.s" + std::to_string(random()) + std::to_string(random());
}

// True when `store` offers administration; otherwise checks that every operation refuses.
bool administered(idem::store& store) {
  if (store.supports_administration()) return true;
  const auto id = fresh_identity("no-admin");
  CHECK_THROWS_AS(store.inspect_record(id, false), idem::configuration_error);
  CHECK_THROWS_AS(store.list_records({}), idem::configuration_error);
  CHECK_THROWS_AS(store.release_record(id, true), idem::configuration_error);
  CHECK_THROWS_AS(store.count_records(), idem::configuration_error);
  return false;
}

}  // namespace

TEST_CASE("admin contract: an absent record is not found", "[contract][admin]") {
  auto store = make_store();
  if (!administered(*store)) return;
  const auto id = fresh_identity("admin-absent");
  CHECK_FALSE(store->inspect_record(id, true).has_value());
  CHECK(store->release_record(id, true) == admin_release::not_found);
}

TEST_CASE("admin contract: a record in progress shows its identity and live lease", "[contract][admin]") {
  auto store = make_store();
  if (!administered(*store)) return;
  const auto id = fresh_identity("admin-held");
  (void)require_acquired(store->try_acquire(held_for(id, 30s, true)));
  const auto r = store->inspect_record(id, true);
  REQUIRE(r.has_value());
  CHECK(r->state == record_state::in_progress);
  CHECK(r->scope == id.scope());
  CHECK(r->key_digest == id.key_digest());
  CHECK(r->to_string() == id.to_string());
  REQUIRE(r->lease_expires_at.has_value());
  CHECK(*r->lease_expires_at > r->read_at + 20s);
  CHECK_FALSE(r->lease_lapsed());
  CHECK(r->created_at <= r->read_at);
  CHECK(r->expires_at > r->read_at + 50min);
  CHECK(r->has_fingerprint);
  CHECK_FALSE(r->completed_at.has_value());
  CHECK_FALSE(r->value.has_value());
}

TEST_CASE("admin contract: a completed record shows its payload only when asked", "[contract][admin]") {
  auto store = make_store();
  if (!administered(*store)) return;
  const auto id = fresh_identity("admin-done");
  const auto token = require_acquired(store->try_acquire(held_for(id, 30s)));
  store->complete(id, token, sample_payload("hello"), 1h);
  const auto plain = store->inspect_record(id, false);
  REQUIRE(plain.has_value());
  CHECK(plain->state == record_state::completed);
  CHECK(plain->payload_type == sample_payload().type);
  CHECK(plain->payload_size == 5);
  CHECK_FALSE(plain->value.has_value());
  CHECK_FALSE(plain->has_fingerprint);
  REQUIRE(plain->completed_at.has_value());
  CHECK(*plain->completed_at <= plain->read_at);
  CHECK(plain->expires_at > plain->read_at + 50min);
  const auto full = store->inspect_record(id, true);
  REQUIRE(full.has_value());
  REQUIRE(full->value.has_value());
  CHECK(*full->value == sample_payload("hello"));
}

TEST_CASE("admin contract: release refuses a live lease and a complete record, and frees a lapsed lease",
          "[contract][admin]") {
  auto store = make_store();
  if (!administered(*store)) return;
  const auto live = fresh_identity("admin-live");
  const auto live_token = require_acquired(store->try_acquire(held_for(live, 30s)));
  CHECK(store->release_record(live, false) == admin_release::lease_live);
  store->complete(live, live_token, sample_payload(), 1h);  // still held: the refusal changed nothing
  CHECK(store->release_record(live, false) == admin_release::completed);
  CHECK(store->release_record(live, true) == admin_release::completed);  // never a complete record
  (void)require_duplicate(store->try_acquire(held_for(live, 30s)));

  const auto lapsed = fresh_identity("admin-lapsed");
  (void)require_acquired(store->try_acquire(held_for(lapsed, 50ms)));
  std::this_thread::sleep_for(120ms);  // a lease lapses with time: no event to wait for
  const auto before = store->inspect_record(lapsed, false);
  REQUIRE(before.has_value());
  CHECK(before->lease_lapsed());
  CHECK(store->release_record(lapsed, false) == admin_release::released);
  CHECK_FALSE(store->inspect_record(lapsed, false).has_value());
  (void)require_acquired(store->try_acquire(held_for(lapsed, 30s)));
}

TEST_CASE("admin contract: a forced release fences the live holder out", "[contract][admin]") {
  auto store = make_store();
  if (!administered(*store)) return;
  const auto id = fresh_identity("admin-forced");
  const auto holder = require_acquired(store->try_acquire(held_for(id, 30s)));
  CHECK(store->release_record(id, true) == admin_release::released);
  CHECK_FALSE(store->extend(id, holder, 30s));
  CHECK_THROWS_AS(store->complete(id, holder, sample_payload("holder"), 1h), idem::lease_lost_error);
  const auto next = require_acquired(store->try_acquire(held_for(id, 30s)));
  CHECK(next != holder);
  CHECK_THROWS_AS(store->complete(id, holder, sample_payload("holder"), 1h), idem::lease_lost_error);
  CHECK_THROWS_AS(store->release(id, holder), idem::lease_lost_error);
  store->complete(id, next, sample_payload("next"), 1h);
  CHECK(require_duplicate(store->try_acquire(held_for(id, 30s))).value == sample_payload("next"));
}

TEST_CASE("admin contract: a listing selects by scope, state and age, oldest first, up to its limit",
          "[contract][admin]") {
  auto store = make_store();
  if (!administered(*store)) return;
  const std::string scope = own_scope();
  std::vector<idem::identity> ids;
  for (const char* hint : {"first", "second", "third"}) ids.push_back(fresh_identity(hint, scope));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto token = require_acquired(store->try_acquire(held_for(ids[i], 30s)));
    if (i != 1) store->complete(ids[i], token, sample_payload(), 1h);
    std::this_thread::sleep_for(5ms);  // distinct creation times, for the order
  }
  const auto all = store->list_records({.scope = scope});
  REQUIRE(all.size() == 3);
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i].to_string() == ids[i].to_string());
  CHECK_FALSE(all[0].value.has_value());
  const auto completed = store->list_records({.scope = scope, .state = record_state::completed});
  REQUIRE(completed.size() == 2);
  CHECK(completed[0].to_string() == ids[0].to_string());
  CHECK(completed[1].to_string() == ids[2].to_string());
  const auto held = store->list_records({.scope = scope, .state = record_state::in_progress});
  REQUIRE(held.size() == 1);
  CHECK(held[0].to_string() == ids[1].to_string());
  CHECK(store->list_records({.scope = scope, .limit = 1}).size() == 1);
  CHECK(store->list_records({.scope = scope, .older_than = 1h}).empty());
  CHECK_THROWS_AS(store->list_records({.limit = 0}), idem::configuration_error);
  CHECK_THROWS_AS(store->list_records({.limit = idem::record_query::max_limit + 1}), idem::configuration_error);
  CHECK_THROWS_AS(store->list_records({.scope = "bad:scope"}), idem::configuration_error);
}

TEST_CASE("admin contract: the counts place each record in one state", "[contract][admin]") {
  auto store = make_store();
  if (!administered(*store)) return;
  const auto before = store->count_records();
  const auto held = fresh_identity("admin-count-held");
  (void)require_acquired(store->try_acquire(held_for(held, 30s)));
  const auto done = fresh_identity("admin-count-done");
  store->complete(done, require_acquired(store->try_acquire(held_for(done, 30s))), sample_payload(), 1h);
  const auto after = store->count_records();
  if (idem::contract::backend_is_exclusive()) {
    CHECK(after.in_progress == before.in_progress + 1);
    CHECK(after.completed == before.completed + 1);
    CHECK(after.abandoned == before.abandoned);
  } else {
    // Other cases write, release and purge in the same backend meanwhile, so the totals may move
    // either way; this case's own two records are live (lease 30 s, ttl 1 h) and no other case
    // touches them, so each state holds at least one.
    CHECK(after.in_progress >= 1);
    CHECK(after.completed >= 1);
  }
}
