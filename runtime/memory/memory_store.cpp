// runtime/memory/memory_store.cpp — idem::memory_store, the embedded default store.
//
// Layout: a power-of-two array of shards. A record lives in the shard its composite key
// `scope ':' key` hashes to (unambiguous: a scope never contains ':'). Each shard is one
// std::mutex, one std::unordered_map and one std::condition_variable, so every operation takes
// exactly one lock. Lookups build the composite key in a stack buffer and search the map with a
// precomputed hash (heterogeneous lookup): a replay allocates nothing but the payload it returns,
// a first call allocates the map node and its strings.
//
// Waiting: a duplicate sleeps on its shard's condition variable until the holder completes or
// releases (both notify, but only when the shard has waiters), until the holder's lease expires
// (then it steals), or until its own deadline. Leases and expiry use steady_clock; completed_at is
// system_clock.
#include <idem/memory_store.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <idem/deadline.hpp>
#include <idem/errors.hpp>

namespace idem {
namespace {

using steady = std::chrono::steady_clock;


// The composite key `scope ':' key`, built without allocating for keys within the identity limits.
// Not copyable: view() points into the object itself.
class composite_key {
 public:
  explicit composite_key(const identity& id) {
    const std::string& scope = id.scope();
    const std::string& key = id.key();
    size_ = scope.size() + 1 + key.size();
    char* out = nullptr;
    if (size_ <= inline_.size()) {
      out = inline_.data();
    } else {  // unreachable for a validated identity; kept so a limit change cannot overflow
      spilled_.resize(size_);
      out = spilled_.data();
    }
    std::memcpy(out, scope.data(), scope.size());
    out[scope.size()] = ':';
    std::memcpy(out + scope.size() + 1, key.data(), key.size());
    data_ = out;
  }
  composite_key(const composite_key&) = delete;
  composite_key& operator=(const composite_key&) = delete;

  std::string_view view() const noexcept { return {data_, size_}; }

 private:
  std::array<char, max_scope_length + 1 + max_key_length> inline_;
  std::string spilled_;
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

// A composite key with its hash computed once: selects the shard and searches its map.
struct hashed_key {
  std::string_view text;
  std::size_t hash;
};

struct key_hash {
  using is_transparent = void;
  // Deliberately not noexcept: libstdc++ then caches each node's hash, which keeps bucket scans
  // and rehashing from hashing stored keys again.
  std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  std::size_t operator()(const hashed_key& key) const { return key.hash; }
};

struct key_equal {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
  bool operator()(const hashed_key& a, std::string_view b) const noexcept { return a.text == b; }
  bool operator()(std::string_view a, const hashed_key& b) const noexcept { return a == b.text; }
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
struct memory_record {
  bool complete = false;
  lease_token token;
  steady::time_point lease_expires;
  steady::time_point expires;
  std::optional<std::string> fingerprint;
  payload value;
  std::chrono::system_clock::time_point completed_at;

  // Turns this record into a fresh acquisition by `ctx` under `new_token`.
  void acquire(const context& ctx, const lease_token& new_token, steady::time_point now) {
    complete = false;
    token = new_token;
    lease_expires = saturating_add(now, ctx.lease);
    expires = saturating_add(now, ctx.ttl);
    fingerprint = ctx.fingerprint;
    if (!value.is_none()) value = payload::none();
    completed_at = {};
  }

  // Whether purge_expired() may delete the record: its ttl passed and nobody holds it.
  bool purgeable(steady::time_point now) const noexcept {
    return expires <= now && (complete || lease_expires <= now);
  }
};

}  // namespace detail

struct alignas(64) memory_store::shard {
  std::mutex mutex;
  std::condition_variable changed;  // a record completed, was released or purged
  std::size_t waiters = 0;          // threads sleeping on `changed`; guarded by `mutex`
  std::unordered_map<std::string, detail::memory_record, key_hash, key_equal> records;

  // Wakes the sleepers, if any. Called with `mutex` held.
  void notify_locked() {
    if (waiters > 0) changed.notify_all();
  }
};

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
      shard_mask_(shard_count_for(options.shards) - 1) {}

memory_store::~memory_store() = default;

memory_store::shard& memory_store::shard_for(std::size_t hash) const {
  return shards_[shard_index(hash, shard_mask_)];
}

acquire_result memory_store::try_acquire(const context& ctx) {
  const composite_key composite(ctx.id);
  const hashed_key key{composite.view(), key_hash{}(composite.view())};
  shard& s = shard_for(key.hash);
  const steady::time_point deadline = deadline_after(ctx.wait);
  detail::waiter_count::scope waiting(waiters_);

  std::unique_lock lock(s.mutex);
  for (;;) {
    const steady::time_point now = steady::now();
    auto it = s.records.find(key);
    if (it == s.records.end()) {
      const lease_token token = lease_token::generate();
      s.records.try_emplace(std::string(key.text)).first->second.acquire(ctx, token, now);
      return acquired{token};
    }

    detail::memory_record& record = it->second;
    if (record.complete) {
      if (record.expires <= now) {  // past its ttl: absent for this acquisition
        const lease_token token = lease_token::generate();
        record.acquire(ctx, token, now);
        return acquired{token};
      }
      if (record.fingerprint && ctx.fingerprint && *record.fingerprint != *ctx.fingerprint) {
        return fingerprint_mismatch{*record.fingerprint, *ctx.fingerprint};
      }
      return duplicate{record.value, record.completed_at};
    }

    if (record.lease_expires <= now) {  // the holder's lease expired: steal it
      const lease_token token = lease_token::generate();
      record.acquire(ctx, token, now);
      return acquired{token};
    }
    if (now >= deadline) return in_flight{remaining_lease(record.lease_expires, now)};

    // Sleep until the holder completes or releases (notified), its lease expires, or our
    // deadline passes; then look again. `record` may be gone by then: it is found afresh.
    const steady::time_point wake = std::min(deadline, record.lease_expires);
    waiting.begin();  // counted under the shard's lock: a complete that follows finds us waiting
    ++s.waiters;
    s.changed.wait_until(lock, wake);
    --s.waiters;
  }
}

void memory_store::complete(const identity& id, const lease_token& token, const payload& value,
                            std::chrono::milliseconds ttl) {
  const composite_key composite(id);
  const hashed_key key{composite.view(), key_hash{}(composite.view())};
  shard& s = shard_for(key.hash);

  payload copy = value;  // copied before locking: a large body does not lengthen the critical section
  std::optional<lease_lost_reason> lost;
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
      record.value = std::move(copy);
      record.complete = true;
      record.token = lease_token{};
      record.completed_at = std::chrono::system_clock::now();
      record.expires = saturating_add(steady::now(), ttl);
      s.notify_locked();
    }
  }
  if (lost) throw_lease_lost("complete", id, *lost);
}

void memory_store::release(const identity& id, const lease_token& token) {
  const composite_key composite(id);
  const hashed_key key{composite.view(), key_hash{}(composite.view())};
  shard& s = shard_for(key.hash);

  std::optional<lease_lost_reason> lost;
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
      s.notify_locked();
    }
  }
  if (lost) throw_lease_lost("release", id, *lost);
}

bool memory_store::extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) {
  const composite_key composite(id);
  const hashed_key key{composite.view(), key_hash{}(composite.view())};
  shard& s = shard_for(key.hash);

  std::lock_guard lock(s.mutex);
  auto it = s.records.find(key);
  if (it == s.records.end() || it->second.complete || it->second.token != token) return false;
  // Waiters sleeping until the old expiry wake then, see the new one and sleep again.
  it->second.lease_expires = saturating_add(steady::now(), lease);
  return true;
}

std::size_t memory_store::purge_expired() {
  std::size_t purged = 0;
  for (std::size_t i = 0; i <= shard_mask_; ++i) {
    shard& s = shards_[i];
    std::lock_guard lock(s.mutex);
    const steady::time_point now = steady::now();
    const std::size_t removed =
        std::erase_if(s.records, [now](const auto& entry) { return entry.second.purgeable(now); });
    if (removed > 0) s.notify_locked();
    purged += removed;
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
