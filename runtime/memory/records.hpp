// runtime/memory/records.hpp — how the memory store keeps a record, and the one rule by which a
// call looks at it (acquire, replay, steal, or wait for its holder).
//
// A record lives in its shard's std::unordered_map. The map's key is the composite `scope ':' key`
// (unambiguous: a scope never contains ':'), kept inside the node; lookups search with the identity
// itself (heterogeneous lookup), comparing its scope and key to that text without composing it: a
// replay allocates nothing but the payload it returns, a first call allocates its map node.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <idem/context.hpp>
#include <idem/deadline.hpp>
#include <idem/lease_token.hpp>
#include <idem/payload.hpp>
#include <idem/store.hpp>

#include "../core/coarse_clock.hpp"

namespace idem::detail::memory {

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

// One record. In progress: `token` owns it until `lease_expires`. Complete: `value` is replayed
// until `expires`. `expires` also bounds an in-progress record for purge_expired().
// 64 bytes: what is often absent (a fingerprint, a payload other than none) lives behind a pointer,
// so a record of a function without a result or fingerprint allocates nothing but its map node.
struct stored_record {
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

static_assert(sizeof(stored_record) <= 64, "a stored record's fixed part fits one cache line");

// A shard's records.
using record_map = std::unordered_map<stored_key, stored_record, key_hash, key_equal>;

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
  stored_record& record = it->second;
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

}  // namespace idem::detail::memory
