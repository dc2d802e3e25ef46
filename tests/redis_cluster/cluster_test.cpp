// tests/redis_cluster/cluster_test.cpp — what only a Redis Cluster involves: records spread over
// the masters, waiting on sharded pub/sub, a slot migrating under a live call (resharding), a
// master failing over. docs/stores/redis.md ("Redis Cluster") states what these show.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <idem/errors.hpp>
#include <idem/lease_token.hpp>
#include <idem/redis_store.hpp>

#include "cluster_support.hpp"
#include "hash_slot.hpp"
#include "support/eventually.hpp"

namespace {

using namespace std::chrono_literals;
using idem::cluster_test::cluster;
using idem::cluster_test::node_info;
using idem::cluster_test::unique_prefix;
using idem::test::eventually;
namespace rd = idem::detail::redis;
using steady = std::chrono::steady_clock;

idem::context make_context(const idem::identity& id, std::chrono::milliseconds wait = 0ms,
                           std::chrono::milliseconds lease = 30s) {
  idem::context ctx{.id = id, .ttl = 1h, .lease = lease, .wait = wait};
  ctx.validate();
  return ctx;
}

idem::payload value_of(const std::string& body) { return idem::payload{"test/cluster", body, {}}; }

cluster& fixture() {
  static cluster shared{cluster::fixture_tag{}};
  return shared;
}

int slot_of(const idem::redis_store& store, const idem::identity& id) {
  return rd::hash_slot(store.record_key(id));
}

bool serves(const node_info& master, int slot) {
  for (auto [first, last] : master.slots) {
    if (slot >= first && slot <= last) return true;
  }
  return false;
}

// `count` identities of `scope` whose records the master `on` serves.
std::vector<idem::identity> identities_on(const idem::redis_store& store, const node_info& on, std::string scope,
                                          std::size_t count) {
  std::vector<idem::identity> out;
  for (int i = 0; out.size() < count; ++i) {
    idem::identity id{scope, "key-" + std::to_string(i)};
    if (serves(on, slot_of(store, id))) out.push_back(std::move(id));
  }
  return out;
}

long long shard_subscribers(cluster& c, const std::string& address, const std::string& channel) {
  rd::reply_ptr reply = c.run(address, {"PUBSUB", "SHARDNUMSUB", channel});
  REQUIRE(reply->type == REDIS_REPLY_ARRAY);
  REQUIRE(reply->elements == 2);
  return reply->element[1]->integer;
}

}  // namespace

TEST_CASE("records spread over all three masters, each under a hash tag of its own") {
  cluster& c = fixture();
  const std::string prefix = unique_prefix("spread");
  idem::redis_store store(c.options(prefix));
  constexpr int records = 300;
  std::set<int> slots;
  for (int i = 0; i < records; ++i) {
    const idem::identity id{"Spread.run", "order-" + std::to_string(i)};
    const std::string key = store.record_key(id);
    // The hash tag is the record's identity: braces around the digest and the scope.
    REQUIRE(key.starts_with(prefix + "rec:{"));
    REQUIRE(key.ends_with(":Spread.run}"));
    REQUIRE(rd::hash_slot(store.channel(id)) == rd::hash_slot(key));
    slots.insert(rd::hash_slot(key));
    auto acquired = store.try_acquire(make_context(id));
    REQUIRE(std::holds_alternative<idem::acquired>(acquired));
    store.complete(id, std::get<idem::acquired>(acquired).token, value_of("done"), 1h);
  }
  std::map<std::string, std::size_t> per_master;
  std::size_t total = 0;
  for (const node_info& n : c.nodes()) {
    if (!n.master) continue;
    per_master[n.address] = c.count_keys(n.address, prefix + "*");
    total += per_master[n.address];
  }
  REQUIRE(per_master.size() == 3);
  REQUIRE(total == records);
  for (const auto& [address, count] : per_master) {
    INFO(address << " holds " << count << " of " << records);
    // Expected 100 each; a shared tag would put all 300 on one master.
    CHECK(count >= 60);
  }
  CHECK(slots.size() >= 290);  // 300 records in at most a handful of shared slots
  WARN("records per master: " << per_master.begin()->second << " / " << std::next(per_master.begin())->second
                              << " / " << per_master.rbegin()->second << "; distinct slots " << slots.size());
}

TEST_CASE("a waiter in a cluster wakes through sharded pub/sub on its slot's master only") {
  cluster& c = fixture();
  idem::redis_store holder(c.options(unique_prefix("wait")));
  idem::redis_store waiter_store(holder.options());
  const idem::identity id{"Wait.run", "order-1"};
  auto acquired = holder.try_acquire(make_context(id));
  REQUIRE(std::holds_alternative<idem::acquired>(acquired));

  auto waiter = std::async(std::launch::async, [&] { return waiter_store.try_acquire(make_context(id, 20s)); });
  REQUIRE(eventually([&] { return waiter_store.waiting() == 1; }, 10s));
  const node_info master = c.master_of(slot_of(holder, id));
  REQUIRE(shard_subscribers(c, master.address, holder.channel(id)) == 1);
  for (const node_info& n : c.nodes()) {
    if (n.master && n.address != master.address) CHECK(shard_subscribers(c, n.address, holder.channel(id)) == 0);
  }

  holder.complete(id, std::get<idem::acquired>(acquired).token, value_of("paid"), 1h);
  REQUIRE(waiter.wait_for(10s) == std::future_status::ready);
  auto answer = waiter.get();
  REQUIRE(std::holds_alternative<idem::duplicate>(answer));
  CHECK(std::get<idem::duplicate>(answer).value.body == "paid");
  CHECK(waiter_store.statistics().message_answers == 1);  // answered from the message, no look
  REQUIRE(eventually([&] { return shard_subscribers(c, master.address, holder.channel(id)) == 0; }, 10s));
}

TEST_CASE("errors in cluster mode name the operation and the masked record, never the key") {
  cluster& c = fixture();
  auto options = c.options(unique_prefix("errors"));
  idem::redis_store store(options);
  const idem::identity id{"Errors.run", "secret-key-4711"};
  try {
    store.complete(id, idem::lease_token::generate(), value_of("x"), 1h);
    FAIL("complete without a claim must throw");
  } catch (const idem::lease_lost_error& e) {
    CHECK(e.operation() == "complete");
    CHECK(e.record() == id.to_string());
    CHECK(std::string(e.what()).find("secret-key-4711") == std::string::npos);
  }
}

TEST_CASE("configuration errors of cluster mode fail in the constructor") {
  cluster& c = fixture();
  auto options = c.options("idem:");
  auto refused = [](idem::redis_store_options o, const std::string& field) {
    try {
      idem::redis_store store(std::move(o));
      FAIL("accepted a bad " << field);
    } catch (const idem::configuration_error& e) {
      CHECK(std::string(e.what()).find(field) != std::string::npos);
    }
  };
  auto o = options;
  o.database = 1;
  refused(o, "database");
  o = options;
  o.prefix = "app{1}:";
  refused(o, "prefix");
  o = options;
  o.cluster.seeds = {"no-port"};
  refused(o, "cluster.seeds");
  o = options;
  o.cluster.enabled = false;
  refused(o, "cluster.seeds");
}

TEST_CASE("purge and statistics cover every master") {
  cluster& c = fixture();
  auto options = c.options(unique_prefix("purge"));
  options.retention_grace = 60s;
  idem::redis_store store(options);
  std::set<std::string> masters_used;
  for (int i = 0; i < 60; ++i) {
    const idem::identity id{"Purge.run", "k" + std::to_string(i)};
    auto ctx = make_context(id);
    ctx.ttl = 1ms;
    ctx.lease = 1ms;
    // Abandoned claims: a complete record would expire natively at its ttl, before any purge.
    REQUIRE(std::holds_alternative<idem::acquired>(store.try_acquire(ctx)));
    masters_used.insert(c.master_of(slot_of(store, id)).address);
  }
  REQUIRE(masters_used.size() == 3);
  std::size_t purged = 0;  // the records' ttl and lease of 1 ms must pass on Redis's clock first
  CHECK(eventually([&] { return (purged += store.purge_expired()) == 60; }, 10s));
  CHECK(purged == 60);
  for (const std::string& address : masters_used) CHECK(c.count_keys(address, options.prefix + "*") == 0);
  const auto s = store.statistics();
  CHECK(s.slot_map_refreshes >= 1);
  CHECK(s.connections_opened >= 3);  // one pool per master
}

// A slot migrates from one master to another while a holder's lease is live and a duplicate
// waits: the holder extends before the move, completes while the record sits on the importing
// master (the old one answers ASK), and the waiter, whose subscription the old master drops when
// the slot is reassigned, follows the slot and gets the replay.
TEST_CASE("reshard: a slot migrates under a live lease and a waiting duplicate, nothing runs twice") {
  cluster c;  // a private cluster: the slot moves
  auto options = c.options(unique_prefix("reshard"));
  idem::redis_store holder(options);
  idem::redis_store waiter_store(options);
  const idem::identity id{"Reshard.run", "order-42"};
  const int slot = slot_of(holder, id);
  const node_info source = c.master_of(slot);
  node_info target;
  for (const node_info& n : c.nodes()) {
    if (n.master && n.id != source.id) target = n;
  }
  REQUIRE(!target.id.empty());

  auto acquired = holder.try_acquire(make_context(id, 0ms, 30s));
  REQUIRE(std::holds_alternative<idem::acquired>(acquired));
  const idem::lease_token token = std::get<idem::acquired>(acquired).token;
  std::atomic<int> runs{1};  // the holder's execution

  auto waiter = std::async(std::launch::async, [&] {
    auto answer = waiter_store.try_acquire(make_context(id, 30s));
    if (std::holds_alternative<idem::acquired>(answer)) runs.fetch_add(1);
    return answer;
  });
  REQUIRE(eventually([&] { return waiter_store.waiting() == 1; }, 10s));
  REQUIRE(shard_subscribers(c, source.address, holder.channel(id)) == 1);

  const std::string s = std::to_string(slot);
  REQUIRE(rd::text(c.run(target.address, {"CLUSTER", "SETSLOT", s, "IMPORTING", source.id}).get()) == "OK");
  REQUIRE(rd::text(c.run(source.address, {"CLUSTER", "SETSLOT", s, "MIGRATING", target.id}).get()) == "OK");
  CHECK(holder.extend(id, token, 30s));  // still on the source: served there
  rd::reply_ptr moved = c.run(source.address, {"MIGRATE", target.address.substr(0, target.address.rfind(':')),
                                               std::to_string(target.port), "", "0", "5000", "KEYS",
                                               holder.record_key(id)});
  REQUIRE(rd::text(moved.get()) == "OK");
  const auto before = holder.statistics().redirections;
  // The record now sits on the importing master; the source answers ASK. The token moved with it.
  CHECK(holder.extend(id, token, 30s));
  CHECK_THROWS_AS(holder.complete(id, idem::lease_token::generate(), value_of("thief"), 1h), idem::lease_lost_error);
  holder.complete(id, token, value_of("paid once"), 1h);
  CHECK(holder.statistics().redirections >= before + 2);
  for (const node_info& n : c.nodes()) {
    if (n.master) REQUIRE(rd::text(c.run(n.address, {"CLUSTER", "SETSLOT", s, "NODE", target.id}).get()) == "OK");
  }

  REQUIRE(waiter.wait_for(20s) == std::future_status::ready);
  auto answer = waiter.get();
  REQUIRE(std::holds_alternative<idem::duplicate>(answer));
  CHECK(std::get<idem::duplicate>(answer).value.body == "paid once");
  CHECK(runs.load() == 1);
  // The record lives on the new owner, and a new store finds it there after one MOVED at most.
  CHECK(c.count_keys(target.address, options.prefix + "*") == 1);
  CHECK(c.count_keys(source.address, options.prefix + "*") == 0);
  auto replay = holder.try_acquire(make_context(id));
  REQUIRE(std::holds_alternative<idem::duplicate>(replay));
  CHECK(std::get<idem::duplicate>(replay).value.body == "paid once");
  WARN("reshard: holder redirections " << holder.statistics().redirections << ", waiter redirections "
                                       << waiter_store.statistics().redirections << ", waiter slot-map refreshes "
                                       << waiter_store.statistics().slot_map_refreshes);
}

// The end of every reshard: `CLUSTER SETSLOT <slot> NODE <new owner>` reaches the masters one at a
// time. Told first, the old owner answers MOVED to the new one, which, not told yet, answers MOVED
// back. Here the window lasts 300 ms on purpose: a first call and a completion made in it wait the
// churn out (a growing pause, the slot map asked again) within command_timeout instead of failing
// after a handful of redirections, and a duplicate waiting across it gets the replay.
TEST_CASE("reshard window: while two masters answer MOVED to each other, calls wait it out and a waiter replays") {
  cluster c;  // a private cluster: the slot moves
  auto options = c.options(unique_prefix("window"));
  options.command_timeout = 3s;
  idem::redis_store holder(options);
  idem::redis_store waiter_store(options);
  idem::redis_store caller(options);
  const idem::identity held{"Window.run", "order-1"};
  const int slot = slot_of(holder, held);
  std::optional<idem::identity> same_slot;  // a record of the same slot, first used inside the window
  for (int i = 2; !same_slot; ++i) {
    idem::identity candidate{"Window.run", "order-" + std::to_string(i)};
    if (slot_of(holder, candidate) == slot) same_slot = candidate;
  }
  const idem::identity fresh = *same_slot;
  const node_info source = c.master_of(slot);
  node_info target;
  std::vector<node_info> masters;
  for (const node_info& n : c.nodes()) {
    if (!n.master) continue;
    masters.push_back(n);
    if (n.id != source.id) target = n;
  }
  REQUIRE(masters.size() == 3);
  // Every store has learned the slot map before the window opens.
  REQUIRE(std::holds_alternative<idem::acquired>(caller.try_acquire(make_context({"Window.warm", "w"}))));

  auto acquired = holder.try_acquire(make_context(held));
  REQUIRE(std::holds_alternative<idem::acquired>(acquired));
  const idem::lease_token token = std::get<idem::acquired>(acquired).token;
  std::atomic<int> runs{1};  // the holder's execution of `held`
  auto waiter = std::async(std::launch::async, [&] {
    auto answer = waiter_store.try_acquire(make_context(held, 30s));
    if (std::holds_alternative<idem::acquired>(answer)) runs.fetch_add(1);
    return answer;
  });
  REQUIRE(eventually([&] { return waiter_store.waiting() == 1; }, 10s));
  REQUIRE(eventually([&] { return shard_subscribers(c, source.address, holder.channel(held)) == 1; }, 10s));

  const std::string s = std::to_string(slot);
  REQUIRE(rd::text(c.run(target.address, {"CLUSTER", "SETSLOT", s, "IMPORTING", source.id}).get()) == "OK");
  REQUIRE(rd::text(c.run(source.address, {"CLUSTER", "SETSLOT", s, "MIGRATING", target.id}).get()) == "OK");
  REQUIRE(rd::text(c.run(source.address, {"MIGRATE", target.address.substr(0, target.address.rfind(':')),
                                          std::to_string(target.port), "", "0", "5000", "KEYS",
                                          holder.record_key(held)})
                       .get()) == "OK");
  // The window opens: only the old owner is told.
  REQUIRE(rd::text(c.run(source.address, {"CLUSTER", "SETSLOT", s, "NODE", target.id}).get()) == "OK");
  const auto opened = steady::now();
  // Both masters now send this slot's commands to each other.
  CHECK(rd::text(c.run(source.address, {"GET", caller.record_key(fresh)}).get()).starts_with("MOVED"));
  CHECK(rd::text(c.run(target.address, {"GET", caller.record_key(fresh)}).get()).starts_with("MOVED"));

  const auto caller_before = caller.statistics();
  auto first_call = std::async(std::launch::async, [&] {
    const auto t = steady::now();
    auto answer = caller.try_acquire(make_context(fresh));
    if (auto* a = std::get_if<idem::acquired>(&answer)) caller.complete(fresh, a->token, value_of("fresh once"), 1h);
    return std::pair{answer.index(), std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t)};
  });
  auto completion = std::async(std::launch::async, [&] { holder.complete(held, token, value_of("held once"), 1h); });
  // The call is inside the window: it has been redirected more often than a stable map needs.
  CHECK(eventually([&] { return caller.statistics().redirections >= caller_before.redirections + 3; }, 10s));
  std::this_thread::sleep_until(opened + 300ms);  // the scenario: the window lasts 300 ms
  const auto closed_after = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - opened);
  CHECK(first_call.wait_for(0ms) == std::future_status::timeout);  // it waited for the window to close
  for (const node_info& n : masters) {
    if (n.id != source.id) {
      REQUIRE(rd::text(c.run(n.address, {"CLUSTER", "SETSLOT", s, "NODE", target.id}).get()) == "OK");
    }
  }

  REQUIRE(first_call.wait_for(20s) == std::future_status::ready);
  const auto [answered, took] = first_call.get();  // rethrows what the call threw
  CHECK(answered == 0);                             // idem::acquired: the first call ran
  REQUIRE(completion.wait_for(20s) == std::future_status::ready);
  completion.get();
  REQUIRE(waiter.wait_for(20s) == std::future_status::ready);
  auto answer = waiter.get();
  REQUIRE(std::holds_alternative<idem::duplicate>(answer));
  CHECK(std::get<idem::duplicate>(answer).value.body == "held once");
  CHECK(runs.load() == 1);
  auto replay = holder.try_acquire(make_context(fresh));
  REQUIRE(std::holds_alternative<idem::duplicate>(replay));
  CHECK(std::get<idem::duplicate>(replay).value.body == "fresh once");
  const auto caller_after = caller.statistics();
  CHECK(caller_after.cluster_retries > caller_before.cluster_retries);
  WARN("reshard window of " << closed_after.count() << " ms: the first call answered after " << took.count()
                            << " ms (command_timeout " << options.command_timeout.count() << " ms), "
                            << caller_after.redirections - caller_before.redirections << " redirections, "
                            << caller_after.cluster_retries - caller_before.cluster_retries << " paced retries, "
                            << caller_after.slot_map_refreshes - caller_before.slot_map_refreshes
                            << " slot-map refreshes; the waiter " << waiter_store.statistics().redirections
                            << " redirections");
}

// A master holding records is SIGKILLed; its replica is promoted. Completions acknowledged by the
// replica (replica_ack) survive; completions made while the replica could not receive them are
// lost with plain acknowledgement and refused (durability_error) with replica_ack. Calls during
// the failover fail with store_unavailable_error, and the same store serves once it is over.
TEST_CASE("failover: a master is killed and its replica promoted, acknowledged completions survive") {
  cluster c;  // a private cluster: a master dies
  auto plain_options = c.options(unique_prefix("failover"));
  plain_options.command_timeout = 500ms;
  auto ack_options = plain_options;
  ack_options.replica_ack = {.replicas = 1, .timeout = 200ms};
  idem::redis_store plain(plain_options);
  idem::redis_store acked(ack_options);

  const node_info victim = c.master_of(0);
  node_info replica;
  for (const node_info& n : c.nodes()) {
    if (!n.master && n.master_id == victim.id) replica = n;
  }
  REQUIRE(!replica.id.empty());
  const auto ids = identities_on(plain, victim, "Failover.run", 50);

  auto complete = [](idem::redis_store& store, const idem::identity& id) {
    auto acquired = store.try_acquire(make_context(id));
    REQUIRE(std::holds_alternative<idem::acquired>(acquired));
    store.complete(id, std::get<idem::acquired>(acquired).token, value_of("done"), 1h);
  };
  // 1. Replica in sync: 10 completions acknowledged by it, and 20 more claims acknowledged.
  for (int i = 0; i < 10; ++i) complete(acked, ids[i]);
  std::vector<idem::lease_token> claims;
  for (int i = 30; i < 50; ++i) {
    auto acquired = acked.try_acquire(make_context(ids[i]));
    REQUIRE(std::holds_alternative<idem::acquired>(acquired));
    claims.push_back(std::get<idem::acquired>(acquired).token);
  }
  // 2. Replica frozen: 20 plain completions succeed on the master alone; the 20 claimed with
  //    replica_ack are refused at completion with durability_error (the caller learns that the
  //    completion may not survive a failover).
  //    The master also drops its replication link, or the frozen replica would find what the master
  //    wrote meanwhile in its socket buffer when it wakes.
  REQUIRE(::kill(c.pid_of(replica.port), SIGSTOP) == 0);
  REQUIRE(c.run(victim.address, {"CLIENT", "KILL", "TYPE", "replica"})->integer == 1);
  for (int i = 10; i < 30; ++i) complete(plain, ids[i]);
  int refused = 0;
  for (int i = 30; i < 50; ++i) {
    try {
      acked.complete(ids[i], claims[static_cast<std::size_t>(i - 30)], value_of("done"), 1h);
    } catch (const idem::durability_error& e) {
      CHECK(e.operation() == "complete");
      ++refused;
    }
  }
  // 3. The master dies; the replica wakes and is promoted.
  REQUIRE(::kill(c.pid_of(victim.port), SIGKILL) == 0);
  REQUIRE(::kill(c.pid_of(replica.port), SIGCONT) == 0);

  // 4. Calls during the failover fail fast; the same store serves once it is over.
  const idem::identity probe = identities_on(plain, victim, "Failover.probe", 1).front();
  int failures = 0;
  std::chrono::milliseconds worst{0};
  const auto failover_started = steady::now();
  bool served = false;
  while (!served && steady::now() - failover_started < 60s) {
    const auto t = steady::now();
    try {
      (void)plain.try_acquire(make_context(probe));
      served = true;
    } catch (const idem::store_unavailable_error& e) {
      ++failures;
      worst = std::max(worst, std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t));
      CHECK(e.operation() == "try_acquire");
      CHECK(e.record() == probe.to_string());
      std::this_thread::sleep_for(20ms);
    }
  }
  REQUIRE(served);
  const auto failover_ms = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - failover_started);
  CHECK(worst <= plain_options.command_timeout + 1s);  // bounded by the budget; 1 s catches a hang

  // 5. Count what survived.
  auto survived = [&](idem::redis_store& store, int from, int to) {
    int n = 0;
    for (int i = from; i < to; ++i) {
      if (std::holds_alternative<idem::duplicate>(store.try_acquire(make_context(ids[i])))) ++n;
    }
    return n;
  };
  const int acked_survived = survived(acked, 0, 10);
  const int plain_survived = survived(plain, 10, 30);
  CHECK(acked_survived == 10);  // acknowledged by the replica: none lost
  CHECK(refused == 20);         // the frozen replica could acknowledge none
  CHECK(plain_survived == 0);   // the replica never received them: the hazard replica_ack reports
  WARN("failover: served again after " << failover_ms.count() << " ms; " << failures
                                       << " calls failed meanwhile, the slowest after " << worst.count()
                                       << " ms; lost completions: replica_ack " << (10 - acked_survived)
                                       << " of 10, plain " << (20 - plain_survived)
                                       << " of 20 (replica frozen); replica_ack refused " << refused << " of 20");
}

TEST_CASE("the documented ACL of cluster mode is enough for the whole lifecycle") {
  cluster& c = fixture();
  auto options = c.options(unique_prefix("acl"));
  const std::string user = "idem-acl-" + idem::lease_token::generate().to_string().substr(0, 8);
  // docs/stores/redis.md, "Least privilege", cluster mode.
  const std::vector<std::string> rule{"ACL", "SETUSER", user, "on", ">secret", "~" + options.prefix + "*",
                                      "&" + options.prefix + "evt:*", "+evalsha", "+eval", "+scan", "+wait",
                                      "+ssubscribe", "+sunsubscribe", "+ping", "+get", "+getrange", "+set", "+del",
                                      "+exists", "+pttl", "+time", "+spublish", "+cluster|shards", "+asking"};
  for (const std::string& node : c.seeds()) REQUIRE(rd::text(c.run(node, rule).get()) == "OK");
  options.username = user;
  options.password = "secret";
  options.replica_ack = {.replicas = 1, .timeout = 500ms};
  {
    idem::redis_store store(options);
    idem::redis_store waiter_store(options);
    for (int i = 0; i < 12; ++i) {  // several slots, so every master sees the user
      const idem::identity id{"Acl.run", "k" + std::to_string(i)};
      auto acquired = store.try_acquire(make_context(id));
      REQUIRE(std::holds_alternative<idem::acquired>(acquired));
      const auto token = std::get<idem::acquired>(acquired).token;
      CHECK(store.extend(id, token, 30s));
      if (i == 0) {
        auto waiter = std::async(std::launch::async, [&] { return waiter_store.try_acquire(make_context(id, 20s)); });
        REQUIRE(eventually([&] { return waiter_store.waiting() == 1; }, 10s));
        store.complete(id, token, value_of("ok"), 1h);
        REQUIRE(waiter.wait_for(10s) == std::future_status::ready);
        CHECK(std::holds_alternative<idem::duplicate>(waiter.get()));
      } else if (i % 2 == 0) {
        store.complete(id, token, value_of("ok"), 1h);
      } else {
        store.release(id, token);
      }
    }
    // Purge under the ACL: claims abandoned past their lease and ttl. The complete records above
    // live for an hour, so these six are all purge may count: a complete record with a 1 ms ttl
    // can be deleted natively or by purge, whichever comes first, and makes the count a race.
    for (int i = 0; i < 6; ++i) {
      idem::context abandoned{.id = {"Acl.abandoned", "k" + std::to_string(i)}, .ttl = 1ms, .lease = 2ms, .wait = 0ms};
      abandoned.validate();
      REQUIRE(std::holds_alternative<idem::acquired>(store.try_acquire(abandoned)));
    }
    std::size_t purged = 0;
    CHECK(eventually([&] { return (purged += store.purge_expired()) == 6; }, 10s));
  }
  for (const std::string& node : c.seeds()) c.run(node, {"ACL", "DELUSER", user});
}

TEST_CASE("the store computes the hash slot Redis computes, hash tags included") {
  cluster& c = fixture();
  const std::vector<std::string> keys{"123456789",           "{user1000}.following", "{user1000}.followers",
                                      "foo{}{bar}",          "foo{{bar}}zap",        "foo{bar}{zap}",
                                      "{",                   "}{",                   "",
                                      "idem:rec:{ab:S{c}d}", std::string("bin\0ary{\xff}", 10)};
  CHECK(rd::hash_slot("123456789") == 0x31C3 % rd::slot_count);  // the specification's CRC16 check value
  CHECK(rd::hash_slot("{user1000}.following") == rd::hash_slot("{user1000}.followers"));
  for (const std::string& key : keys) {
    rd::reply_ptr reply = c.run(c.seeds().front(), {"CLUSTER", "KEYSLOT", key});
    REQUIRE(reply->type == REDIS_REPLY_INTEGER);
    CHECK(rd::hash_slot(key) == reply->integer);
  }
}

TEST_CASE("in steady state routing adds no round trip: two per first call, one per replay, no redirection") {
  cluster& c = fixture();
  idem::redis_store store(c.options(unique_prefix("steady")));
  (void)store.try_acquire(make_context({"Steady.warm", "w"}));  // loads the slot map, opens connections
  const auto before = store.statistics();
  constexpr int calls = 100;
  for (int i = 0; i < calls; ++i) {
    const idem::identity id{"Steady.run", "k" + std::to_string(i)};
    auto acquired = store.try_acquire(make_context(id));
    REQUIRE(std::holds_alternative<idem::acquired>(acquired));
    store.complete(id, std::get<idem::acquired>(acquired).token, value_of("v"), 1h);
    REQUIRE(std::holds_alternative<idem::duplicate>(store.try_acquire(make_context(id))));
  }
  const auto after = store.statistics();
  CHECK(after.round_trips - before.round_trips == 3 * calls);
  CHECK(after.redirections == 0);
  CHECK(after.slot_map_refreshes == 1);
}

// A master stops serving a slot (CLUSTER DELSLOTS): it answers CLUSTERDOWN, which the store retries
// with a growing pause until command_timeout has passed, then reports; once the slot is served
// again the same store serves it.
TEST_CASE("CLUSTERDOWN is retried within command_timeout, then store_unavailable_error, and the store recovers") {
  cluster c;  // a private cluster: a slot goes unserved
  auto options = c.options(unique_prefix("down"));
  options.command_timeout = 300ms;
  idem::redis_store store(options);
  const idem::identity id{"Down.run", "order-7"};
  const int slot = slot_of(store, id);
  REQUIRE(std::holds_alternative<idem::acquired>(store.try_acquire(make_context({"Down.warm", "w"}))));
  const node_info master = c.master_of(slot);
  REQUIRE(rd::text(c.run(master.address, {"CLUSTER", "DELSLOTS", std::to_string(slot)}).get()) == "OK");

  const auto t = steady::now();
  try {
    (void)store.try_acquire(make_context(id));
    FAIL("a call on an unserved slot must fail");
  } catch (const idem::store_unavailable_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("CLUSTERDOWN") != std::string::npos);
    CHECK(e.operation() == "try_acquire");
    CHECK(e.record() == id.to_string());
    CHECK(what.find("order-7") == std::string::npos);
  }
  const auto failed_after = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t);
  CHECK(store.statistics().cluster_retries >= 1);
  CHECK(failed_after < options.command_timeout + 2s);  // bounded by the budget; 2 s catches a hang

  REQUIRE(rd::text(c.run(master.address, {"CLUSTER", "ADDSLOTS", std::to_string(slot)}).get()) == "OK");
  bool served = false;
  CHECK(eventually(
      [&] {
        try {
          served = std::holds_alternative<idem::acquired>(store.try_acquire(make_context(id)));
        } catch (const idem::store_unavailable_error&) {
        }
        return served;
      },
      20s));
  WARN("CLUSTERDOWN: reported after " << failed_after.count() << " ms (command_timeout "
                                      << options.command_timeout.count() << " ms), "
                                      << store.statistics().cluster_retries << " retries");
}

// A master freezes (SIGSTOP: it accepts connections and answers nothing, as behind a partition);
// the cluster promotes its replica. A call sent to the frozen master times out as
// outcome_unknown_error; the store then asks the cluster for the slot map, so a later call goes
// to the promoted replica without the frozen master ever answering again.
TEST_CASE("failover of a frozen master: after a timeout the store follows the promoted replica") {
  cluster c;  // a private cluster: a master freezes
  auto options = c.options(unique_prefix("frozen"));
  options.command_timeout = 300ms;
  idem::redis_store store(options);
  const node_info victim = c.master_of(0);
  const idem::identity id = identities_on(store, victim, "Frozen.run", 1).front();
  REQUIRE(std::holds_alternative<idem::acquired>(store.try_acquire(make_context({"Frozen.warm", "w"}))));
  const int slot = slot_of(store, id);
  REQUIRE(::kill(c.pid_of(victim.port), SIGSTOP) == 0);
  // Wait (bounded) until another master reports the slot served by the promoted replica.
  REQUIRE(eventually(
      [&] {
        try {
          return c.master_of(slot, victim.address).id != victim.id;
        } catch (const std::exception&) {
          return false;
        }
      },
      30s));
  int timeouts = 0;
  bool served = false;
  for (int call = 0; call < 20 && !served; ++call) {
    try {
      served = std::holds_alternative<idem::acquired>(store.try_acquire(make_context(id)));
    } catch (const idem::outcome_unknown_error&) {
      ++timeouts;  // sent to the frozen master
    } catch (const idem::store_unavailable_error&) {
    }
  }
  CHECK(served);
  CHECK(timeouts <= 1);  // one call learns that the master is gone; the next one goes elsewhere
  ::kill(c.pid_of(victim.port), SIGCONT);
  WARN("frozen master: " << timeouts << " call(s) timed out before the store followed the promoted replica");
}
