// runtime/memory/memory_store.cpp — idem::memory_store, the embedded default store.
//
// Layout: a power-of-two array of shards. A record lives in the shard its identity's hash
// (identity::hash, computed once per call and kept by the identity) selects. Each shard is one
// std::mutex, one std::unordered_map and a list of waiters, so every operation takes exactly one
// lock. The map's key is the composite `scope ':' key` (unambiguous: a scope never contains ':'),
// kept inside the node; lookups search with the identity itself (heterogeneous lookup), comparing
// its scope and key to that text without composing it: a replay allocates nothing but the payload
// it returns, a first call allocates its map node.
//
// Waiting: a duplicate that finds the record held registers a waiter on its shard (blocking
// callers and asynchronous ones alike) and a timer at the sooner of its deadline and the holder's
// lease expiry. A complete, release or purge re-looks for the shard's waiters of that record (under
// the shard's lock, so the answer is the record's state at that moment) and answers those it can;
// a timer re-looks and steals an expired lease or answers in flight; a cancellation answers
// operation_cancelled. Handlers run after the lock is released. A blocking try_acquire waits for
// its waiter's handler. Leases and expiry use steady_clock; completed_at is the system clock as of
// the kernel's last tick (detail::coarse_system_now). A replay of a record far from its expiry
// reads only the kernel's coarse clock (detail::surely_in_future).
#include <idem/memory_store.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <idem/deadline.hpp>
#include <idem/detail/function_ref.hpp>
#include <idem/errors.hpp>

#include "../core/caught.hpp"
#include "../core/coarse_clock.hpp"
#include "../core/timer_queue.hpp"

namespace idem {
namespace {

using steady = std::chrono::steady_clock;


// A record's identity as its shard's map holds it: the composite key `scope ':' key` and the
// identity's hash. The text is kept inside the map's node for the keys most services use, so that
// a record costs one allocation; a longer one spills to the heap. Built in place in its node and
// never moved (the map moves nodes, not keys).
class stored_key {
 public:
  explicit stored_key(const identity& id) : hash_(id.hash()) {
    const std::string& scope = id.scope();
    const std::string& key = id.key();
    size_ = static_cast<std::uint32_t>(scope.size() + 1 + key.size());
    char* out = inline_.data();
    if (size_ > inline_.size()) {
      spilled_ = std::make_unique<char[]>(size_);
      out = spilled_.get();
    }
    std::memcpy(out, scope.data(), scope.size());
    out[scope.size()] = ':';
    std::memcpy(out + scope.size() + 1, key.data(), key.size());
  }
  stored_key(const stored_key&) = delete;
  stored_key& operator=(const stored_key&) = delete;

  std::size_t hash() const noexcept { return hash_; }
  std::string_view text() const noexcept { return {spilled_ ? spilled_.get() : inline_.data(), size_}; }

  // Whether this is the record of `id`, whose hash is `id_hash`, compared without composing `id`'s
  // key: the hashes first, which tells most other records apart at once.
  bool names(const identity& id, std::size_t id_hash) const noexcept {
    if (hash_ != id_hash) return false;
    const std::string& scope = id.scope();
    const std::string& key = id.key();
    const std::string_view text = this->text();
    // The ':' pins the split: a scope has none, so only this scope and this key compose `text`.
    return text.size() == scope.size() + 1 + key.size() && text[scope.size()] == ':' && text.ends_with(key) &&
           text.starts_with(scope);
  }

 private:
  std::unique_ptr<char[]> spilled_;  // null while the text fits inline_
  std::size_t hash_;
  std::uint32_t size_;
  // 60 characters: a UUID key (36) under a scope of up to 23, or a 22-byte key under one of up to
  // 37. The node (map link, key, record) is then 152 bytes, one 160-byte malloc chunk, where a
  // std::string's own allocation made two chunks of 176 bytes or more together.
  std::array<char, 60> inline_;
};

static_assert(sizeof(stored_key) == 80, "the stored key's size the node's layout is chosen for");

// What a lookup searches the map with: the identity itself, hashed once (identity::hash keeps it).
struct looked_up {
  const identity& id;
  std::size_t hash;
  explicit looked_up(const identity& i) : id(i), hash(i.hash()) {}
};

struct key_hash {
  using is_transparent = void;
  // noexcept and cheap, so libstdc++ does not cache a second copy of the hash in each node.
  std::size_t operator()(const stored_key& key) const noexcept { return key.hash(); }
  std::size_t operator()(const looked_up& key) const noexcept { return key.hash; }
};

struct key_equal {
  using is_transparent = void;
  bool operator()(const stored_key& a, const stored_key& b) const noexcept {
    return a.hash() == b.hash() && a.text() == b.text();  // the hashes first, as names() does
  }
  bool operator()(const looked_up& a, const stored_key& b) const noexcept { return b.names(a.id, a.hash); }
  bool operator()(const stored_key& a, const looked_up& b) const noexcept { return a.names(b.id, b.hash); }
};

enum class lease_lost_reason { absent, complete, other_token };

[[noreturn]] void throw_lease_lost(std::string_view operation, const identity& id, lease_lost_reason reason) {
  const std::string record = id.to_string();
  std::string message = "cannot ";
  message += operation;
  message += ' ';
  message += record;
  switch (reason) {
    case lease_lost_reason::absent:
      message += ": no record exists (it was released, purged or never acquired)";
      break;
    case lease_lost_reason::complete:
      message += ": the record is already complete, so no lease owns it";
      break;
    case lease_lost_reason::other_token:
      message += ": the lease no longer owns the record (it expired and was taken over)";
      break;
  }
  throw lease_lost_error(message, std::string(operation), record);
}

}  // namespace

namespace detail {

// One record. In progress: `token` owns it until `lease_expires`. Complete: `value` is replayed
// until `expires`. `expires` also bounds an in-progress record for purge_expired().
// 64 bytes: what is often absent (a fingerprint, a payload other than none) lives behind a pointer,
// so a record of a function without a result or fingerprint allocates nothing but its map node.
struct memory_record {
  lease_token token;
  steady::time_point lease_expires;
  steady::time_point expires;
  std::chrono::system_clock::time_point completed_at;
  std::unique_ptr<const std::string> fingerprint;  // null: none
  std::unique_ptr<const payload> value;            // null: payload::none()
  bool complete = false;

  // Turns this record into a fresh acquisition by `ctx` under `new_token`.
  void acquire(const context& ctx, const lease_token& new_token, steady::time_point now) {
    complete = false;
    token = new_token;
    lease_expires = saturating_add(now, ctx.lease);
    expires = saturating_add(now, ctx.ttl);
    fingerprint = ctx.fingerprint ? std::make_unique<const std::string>(*ctx.fingerprint) : nullptr;
    value.reset();
    completed_at = {};
  }

  // Writes this complete record's replay into `out`, its payload built in place (a payload is three
  // containers: every move on a replay's way costs).
  void replay_into(acquire_result& out) const {
    duplicate& d = out.emplace<duplicate>();
    if (value) d.value = *value;
    d.completed_at = completed_at;
  }

  // Whether purge_expired() may delete the record: its ttl passed and nobody holds it.
  bool purgeable(steady::time_point now) const noexcept {
    return expires <= now && (complete || lease_expires <= now);
  }
};

static_assert(sizeof(memory_record) <= 64, "a stored record's fixed part fits one cache line");

}  // namespace detail

// A caller waiting for a record's holder: a blocking try_acquire or an async_try_acquire.
// Registered in its shard while it waits; guarded by the shard's mutex.
struct memory_store::waiter {
  waiter(const context& c, cancellation* cancel_request, async_handler<acquire_result> handler)
      : ctx(c), cancel(cancel_request), done(std::move(handler)) {}

  const context ctx;  // its identity keeps its hash
  std::optional<detail::waiter_count::scope> counted;  // while registered
  cancellation* const cancel;  // may be null
  async_handler<acquire_result> done;
  steady::time_point deadline;
  detail::timer_queue::timer timer;
};

struct alignas(64) memory_store::shard {
  std::mutex mutex;
  std::unordered_map<stored_key, detail::memory_record, key_hash, key_equal> records;
  std::vector<std::shared_ptr<waiter>> waiters;  // guarded by `mutex`
};

// Answers taken from their shard, handed out once its lock is released.
struct memory_store::ready_list {
  struct entry {
    std::shared_ptr<waiter> who;
    std::exception_ptr error;
    acquire_result result;
  };
  std::vector<entry> entries;

  void add(std::shared_ptr<waiter> who, acquire_result result) {
    entries.push_back({std::move(who), nullptr, std::move(result)});
  }
  void add(std::shared_ptr<waiter> who, std::exception_ptr error) {
    entries.push_back({std::move(who), std::move(error), acquire_result{in_flight{}}});
  }
};

void memory_store::answer(ready_list& ready) {
  for (ready_list::entry& e : ready.entries) {
    if (e.who->cancel != nullptr) e.who->cancel->clear();
    e.who->done(std::move(e.error), std::move(e.result));
  }
  ready.entries.clear();
}

namespace {

std::size_t shard_count_for(std::size_t requested) noexcept {
  constexpr std::size_t max_shards = std::size_t{1} << 16;
  return std::bit_ceil(std::clamp<std::size_t>(requested, 1, max_shards));
}

// Spreads a hash over the shard bits (std::hash of a string is good, but its low bits also pick
// the bucket inside the shard's map; mixing keeps the two choices independent).
std::size_t shard_index(std::size_t hash, std::size_t mask) noexcept {
  std::uint64_t h = hash;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<std::size_t>(h) & mask;
}

}  // namespace

memory_store::memory_store(memory_store_options options)
    : shards_(std::make_unique<shard[]>(shard_count_for(options.shards))),
      shard_mask_(shard_count_for(options.shards) - 1),
      timers_(std::make_unique<detail::timer_queue>()) {}

memory_store::~memory_store() {
  // No timer fires from here on; callers still waiting are answered, so none hangs.
  timers_->stop();
  ready_list ready;
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    shard& s = shards_[i];
    std::lock_guard lock(s.mutex);
    while (!s.waiters.empty()) {
      const std::string record = s.waiters.back()->ctx.id.to_string();
      ready.add(take_locked(s, s.waiters.size() - 1),
                std::make_exception_ptr(store_unavailable_error(
                    "memory_store: cannot try_acquire " + record + ": the store was destroyed while the caller waited",
                    "try_acquire", record)));
    }
  }
  answer(ready);
}

memory_store::shard& memory_store::shard_for(std::size_t hash) const {
  return shards_[shard_index(hash, shard_mask_)];
}

namespace {

// steady_clock::now(), read when first asked for: a replay of a record far from its expiry
// decides without it (detail::surely_in_future), every other answer reads it once.
class clock_reading {
 public:
  clock_reading() = default;
  explicit clock_reading(steady::time_point now) : now_(now) {}
  steady::time_point now() {
    if (!now_) now_ = steady::now();
    return *now_;
  }

 private:
  std::optional<steady::time_point> now_;
};

// One look at `key`'s record for `ctx`, under its shard's lock: acquires an absent, expired or
// stolen record, replays a complete one (true, the answer written to `out`), or reports when the
// holder's lease ends (false).
template <class Records>
bool look(Records& records, const context& ctx, clock_reading& clock, acquire_result& out,
          steady::time_point& held_until) {
  auto it = records.find(looked_up(ctx.id));
  if (it == records.end()) {
    const lease_token token = lease_token::generate();
    records.emplace(std::piecewise_construct, std::forward_as_tuple(ctx.id), std::forward_as_tuple())
        .first->second.acquire(ctx, token, clock.now());
    out = acquired{token};
    return true;
  }
  detail::memory_record& record = it->second;
  if (record.complete) {
    if (!detail::surely_in_future(record.expires) && record.expires <= clock.now()) {
      // past its ttl: absent for this acquisition
      const lease_token token = lease_token::generate();
      record.acquire(ctx, token, clock.now());
      out = acquired{token};
    } else if (record.fingerprint && ctx.fingerprint && *record.fingerprint != *ctx.fingerprint) {
      out = fingerprint_mismatch{*record.fingerprint, *ctx.fingerprint};
    } else {
      record.replay_into(out);
    }
    return true;
  }
  if (record.lease_expires <= clock.now()) {  // the holder's lease expired: steal it
    const lease_token token = lease_token::generate();
    record.acquire(ctx, token, clock.now());
    out = acquired{token, /*took_over=*/true};
    return true;
  }
  held_until = record.lease_expires;
  return false;
}

}  // namespace

std::shared_ptr<memory_store::waiter> memory_store::take_locked(shard& s, std::size_t index) {
  std::shared_ptr<waiter> w = std::move(s.waiters[index]);
  s.waiters[index] = std::move(s.waiters.back());
  s.waiters.pop_back();
  timers_->cancel(w->timer);
  w->counted.reset();
  return w;
}

bool memory_store::settle_locked(shard& s, std::size_t index, steady::time_point now, ready_list& ready) {
  waiter& w = *s.waiters[index];
  acquire_result answer{in_flight{}};
  steady::time_point held_until{};
  clock_reading clock(now);
  const bool answered = look(s.records, w.ctx, clock, answer, held_until);
  if (!answered && now >= w.deadline) answer = in_flight{remaining_lease(held_until, now)};
  if (answered || now >= w.deadline) {
    ready.add(take_locked(s, index), std::move(answer));
    return true;
  }
  arm_locked(s, index, std::min(w.deadline, held_until));
  return false;
}

void memory_store::arm_locked(shard& s, std::size_t index, steady::time_point wake) {
  waiter& w = *s.waiters[index];
  if (w.timer && w.timer.at == wake) return;
  timers_->cancel(w.timer);
  w.timer = timers_->schedule(wake, [this, &s, weak = std::weak_ptr<waiter>(s.waiters[index])] { on_timer(s, weak); });
}

void memory_store::relook_locked(shard& s, const identity* id, ready_list& ready) {
  if (s.waiters.empty()) return;
  const steady::time_point now = steady::now();
  for (std::size_t i = 0; i < s.waiters.size();) {
    if (id != nullptr && !(s.waiters[i]->ctx.id == *id)) {
      ++i;
      continue;
    }
    if (!settle_locked(s, i, now, ready)) ++i;  // a taken waiter's place holds the last one now
  }
}

std::optional<std::size_t> memory_store::find_locked(const shard& s, const std::weak_ptr<waiter>& who) {
  const std::shared_ptr<waiter> w = who.lock();
  if (!w) return std::nullopt;
  for (std::size_t i = 0; i < s.waiters.size(); ++i) {
    if (s.waiters[i] == w) return i;
  }
  return std::nullopt;
}

void memory_store::on_timer(shard& s, const std::weak_ptr<waiter>& who) {
  ready_list ready;
  {
    std::lock_guard lock(s.mutex);
    if (const auto index = find_locked(s, who)) {
      s.waiters[*index]->timer = {};  // this one fired
      settle_locked(s, *index, steady::now(), ready);
    }
  }
  answer(ready);
}

void memory_store::on_cancel(shard& s, const std::weak_ptr<waiter>& who) {
  ready_list ready;
  {
    std::lock_guard lock(s.mutex);
    if (const auto index = find_locked(s, who)) {
      ready.add(take_locked(s, *index), std::make_exception_ptr(operation_cancelled()));
    }
  }
  answer(ready);
}

bool memory_store::look_or_wait(const context& ctx, cancellation* cancel,
                                detail::function_ref<async_handler<acquire_result>()> make_handler,
                                acquire_result& answered) {
  shard& s = shard_for(ctx.id.hash());
  std::shared_ptr<waiter> refused;  // cancelled before it could wait
  {
    std::lock_guard lock(s.mutex);
    clock_reading clock;
    steady::time_point held_until{};
    if (look(s.records, ctx, clock, answered, held_until)) return true;
    const steady::time_point now = clock.now();
    if (ctx.wait <= std::chrono::milliseconds::zero()) {
      answered = in_flight{remaining_lease(held_until, now)};
      return true;
    }
    auto w = std::make_shared<waiter>(ctx, cancel, make_handler());
    w->deadline = saturating_add(now, ctx.wait);
    if (cancel != nullptr &&
        !cancel->install([this, &s, weak = std::weak_ptr<waiter>(w)] { on_cancel(s, weak); })) {
      refused = std::move(w);
    } else {
      w->counted.emplace(waiters_);
      w->counted->begin();  // under the shard's lock: a complete that follows finds it waiting
      s.waiters.push_back(w);
      arm_locked(s, s.waiters.size() - 1, std::min(w->deadline, held_until));
    }
  }
  if (refused) refused->done(std::make_exception_ptr(operation_cancelled()), acquire_result{in_flight{}});
  return false;
}

acquire_result memory_store::try_acquire(const context& ctx) {
  // The waiter's handler hands the answer to this thread; built only when the call waits, so that
  // a call answered at once pays for no mutex or condition variable.
  struct blocking_wait {
    std::mutex mutex;
    std::condition_variable answered;
    bool done = false;
    std::exception_ptr error;
    acquire_result result{in_flight{}};
  };
  std::optional<blocking_wait> wait;
  acquire_result answer{in_flight{}};  // the one object returned: no move of a replay's payload
  if (!look_or_wait(ctx, nullptr,
                   [&]() -> async_handler<acquire_result> {
                     blocking_wait& w = wait.emplace();
                     return [&w](std::exception_ptr error, acquire_result result) {
                       std::lock_guard lock(w.mutex);
                       w.error = std::move(error);
                       w.result = std::move(result);
                       w.done = true;
                       w.answered.notify_one();  // under the lock: `w` lives until it is released
                     };
                   },
                   answer)) {
    std::unique_lock lock(wait->mutex);
    wait->answered.wait(lock, [&] { return wait->done; });
    if (wait->error) std::rethrow_exception(std::move(wait->error));
    answer = std::move(wait->result);
  }
  return answer;
}

void memory_store::async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) {
  bool handed_over = false;
  bool answered = false;
  acquire_result answer{in_flight{}};
  std::exception_ptr error = detail::caught([&] {
    answered = look_or_wait(ctx, cancel,
                            [&] {
                              handed_over = true;
                              return std::move(done);
                            },
                            answer);
  });
  if (handed_over) return;  // the waiter answers, whatever happened after it took the handler
  if (error) return done(std::move(error), acquire_result{in_flight{}});
  if (answered) done(nullptr, std::move(answer));
}

void memory_store::complete(const identity& id, const lease_token& token, const payload& value,
                            std::chrono::milliseconds ttl) {
  const looked_up key(id);
  shard& s = shard_for(key.hash);

  // Copied before locking: a large body does not lengthen the critical section.
  std::unique_ptr<const payload> copy = value.is_none() ? nullptr : std::make_unique<const payload>(value);
  std::optional<lease_lost_reason> lost;
  ready_list ready;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.records.find(key);
    if (it == s.records.end()) {
      lost = lease_lost_reason::absent;
    } else if (it->second.complete) {
      lost = lease_lost_reason::complete;
    } else if (it->second.token != token) {
      lost = lease_lost_reason::other_token;
    } else {
      detail::memory_record& record = it->second;
      record.value = std::move(copy);  // null for none
      record.complete = true;
      record.token = lease_token{};
      record.completed_at = detail::coarse_system_now();  // reported only: a tick is precise enough
      record.expires = saturating_add(steady::now(), ttl);
      relook_locked(s, &id, ready);
    }
  }
  answer(ready);
  if (lost) throw_lease_lost("complete", id, *lost);
}

void memory_store::release(const identity& id, const lease_token& token) {
  const looked_up key(id);
  shard& s = shard_for(key.hash);

  std::optional<lease_lost_reason> lost;
  ready_list ready;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.records.find(key);
    if (it == s.records.end()) {
      lost = lease_lost_reason::absent;
    } else if (it->second.complete) {
      lost = lease_lost_reason::complete;
    } else if (it->second.token != token) {
      lost = lease_lost_reason::other_token;
    } else {
      s.records.erase(it);
      relook_locked(s, &id, ready);  // the first waiter acquires it afresh
    }
  }
  answer(ready);
  if (lost) throw_lease_lost("release", id, *lost);
}

// The memory store's operations finish at once: the asynchronous ones answer before returning.
void memory_store::async_complete(const identity& id, const lease_token& token, const payload& value,
                                  std::chrono::milliseconds ttl, async_done done) {
  std::exception_ptr error;
  try {
    complete(id, token, value, ttl);
  } catch (...) {
    error = std::current_exception();
  }
  done(error);
}

void memory_store::async_release(const identity& id, const lease_token& token, async_done done) {
  std::exception_ptr error;
  try {
    release(id, token);
  } catch (...) {
    error = std::current_exception();
  }
  done(error);
}

bool memory_store::extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) {
  const looked_up key(id);
  shard& s = shard_for(key.hash);

  std::lock_guard lock(s.mutex);
  auto it = s.records.find(key);
  if (it == s.records.end() || it->second.complete || it->second.token != token) return false;
  // Waiters whose timer is due at the old expiry wake then, see the new one and wait again.
  it->second.lease_expires = saturating_add(steady::now(), lease);
  return true;
}

std::size_t memory_store::purge_expired() {
  std::size_t purged = 0;
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    shard& s = shards_[i];
    ready_list ready;
    {
      std::lock_guard lock(s.mutex);
      const steady::time_point now = steady::now();
      const std::size_t removed =
          std::erase_if(s.records, [now](const auto& entry) { return entry.second.purgeable(now); });
      if (removed > 0) relook_locked(s, nullptr, ready);
      purged += removed;
    }
    answer(ready);
  }
  return purged;
}

std::size_t memory_store::size() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    shard& s = shards_[i];
    std::lock_guard lock(s.mutex);
    total += s.records.size();
  }
  return total;
}

}  // namespace idem
