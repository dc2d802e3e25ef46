// idem/identity.hpp — what identifies an idempotency record: a scope and a key.
//
// The scope names the unit of work (default `<Class>.<method>`), the key names the attempt.
// Keys are client data: idem renders a record as `Scope/#xxxxxxxx`, the first four bytes of the
// key's SHA-256 in lowercase hex, in every log line and exception message.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace idem {

inline constexpr std::size_t max_scope_length = 128;
inline constexpr std::size_t max_key_length = 255;

// Returns an empty string if `scope` is a valid scope (1..128 characters, not only whitespace, no
// ':'), otherwise the reason it is not. Used by the runtime and by idem-annotate: one place for the rule.
[[nodiscard]] std::string scope_problem(std::string_view scope);

// Returns an empty string if `key` is a valid key (1..255 bytes), otherwise the reason. The reason
// never quotes the key.
[[nodiscard]] std::string key_problem(std::string_view key);

// The SHA-256 of `bytes` (OpenSSL's libcrypto).
std::array<unsigned char, 32> sha256(std::string_view bytes);

// Lowercase hex of `bytes`.
std::string to_hex(const unsigned char* bytes, std::size_t size);

// Writes the lowercase hex of `bytes` at `out`, which has room for 2 * size characters: the digits
// of to_hex and append_hex, for a caller that keeps them in place.
void write_hex(char* out, const unsigned char* bytes, std::size_t size) noexcept;

// Appends the lowercase hex of `bytes` to `out`: to_hex without a string of its own, for keys
// composed around a digest.
void append_hex(std::string& out, const unsigned char* bytes, std::size_t size);

// `#xxxxxxxx`: the first four bytes of a key's SHA-256 in lowercase hex, how a key appears in
// every message (identity::masked_key, and records read back by their digest).
std::string masked_digest(const std::array<unsigned char, 32>& digest);

namespace detail {
// A static_scope's name, kept for the rest of the program together with its hash (the scope's part
// of identity::hash, computed once per name instead of once per call).
struct kept_scope {
  std::string name;
  std::size_t hash;
};
}  // namespace detail

// idem::static_scope
//
// A scope checked once and kept until the program ends, for the many calls made under one name (a
// guarded function's policy, an HTTP endpoint): an identity made from it refers to the kept name
// instead of copying it and does not check it again, so such a call allocates nothing and checks
// nothing for its scope. Equal names share one kept copy. Meant for names fixed in the program:
// every distinct name stays in memory, so a scope built from request data belongs in identity's
// std::string constructor. Cheap to copy; may be made on any thread.
class static_scope {
 public:
  // Throws configuration_error if `name` breaks the scope rules (scope_problem).
  explicit static_scope(std::string_view name);

  const std::string& name() const noexcept { return kept_->name; }

 private:
  friend class identity;
  const detail::kept_scope* kept_;  // in the process-wide set of kept names, never freed
};

// idem::identity
//
// A validated (scope, key) pair. A value type: cheap to move, compared by content.
class identity {
 public:
  // Throws configuration_error if `scope` breaks the scope rules and invalid_key_error if `key`
  // breaks the key rules. Neither message contains the key.
  identity(std::string scope, std::string key);
  // The same under an already checked, kept scope, which the identity refers to without copying it.
  // Throws invalid_key_error if `key` breaks the key rules.
  identity(static_scope scope, std::string key);
  // Copies carry the key's digest and the hash once computed; a moved-from identity has neither.
  // Inline: every call copies or moves its identity a few times.
  identity(const identity& other) : own_scope_(other.own_scope_), key_(other.key_) { adopt(other); }
  identity(identity&& other) noexcept : own_scope_(std::move(other.own_scope_)), key_(std::move(other.key_)) {
    adopt(other);
    other.forget_derived();
  }
  identity& operator=(const identity& other) {
    if (this != &other) {
      own_scope_ = other.own_scope_;
      key_ = other.key_;
      adopt(other);
    }
    return *this;
  }
  identity& operator=(identity&& other) noexcept {
    if (this != &other) {
      own_scope_ = std::move(other.own_scope_);
      key_ = std::move(other.key_);
      adopt(other);
      other.forget_derived();
    }
    return *this;
  }
  ~identity() = default;

  const std::string& scope() const noexcept { return kept_ != nullptr ? kept_->name : own_scope_; }
  // The raw key. Client data: never log it.
  const std::string& key() const noexcept { return key_; }

  // SHA-256 of the key. Stores persist this, never the raw key. Computed on the first call and kept
  // (copies included), so a claim, its heartbeats and its completion hash the key once. Safe to
  // call from several threads at once.
  std::array<unsigned char, 32> key_digest() const;

  // A hash of the scope and the key (equal identities hash alike, whichever scope constructor made
  // them), for hash tables of records. Computed on the first call and kept (copies included), so
  // the lookups of one call hash the key once. Safe to call from several threads at once.
  [[nodiscard]] std::size_t hash() const noexcept {
    const std::size_t kept = hash_.load(std::memory_order_relaxed);
    return kept != no_hash ? kept : compute_hash();
  }

  // `#xxxxxxxx`: the first four bytes of the key's SHA-256 in lowercase hex.
  std::string masked_key() const;

  // `Scope/#xxxxxxxx`: how a record appears in every message.
  std::string to_string() const;

  friend bool operator==(const identity& a, const identity& b) noexcept {
    return ((a.kept_ != nullptr && a.kept_ == b.kept_) || a.scope() == b.scope()) && a.key_ == b.key_;
  }

 private:
  enum digest_state : std::uint8_t { no_digest, writing_digest, has_digest };
  static constexpr std::size_t no_hash = 0;  // a computed hash of 0 is kept as 1

  // Takes the rest of `other` once its strings are ours: the kept scope it refers to (if any), its
  // digest and its hash if it has them (else forgets ours).
  void adopt(const identity& other) noexcept {
    kept_ = other.kept_;
    if (other.digest_state_.load(std::memory_order_acquire) == has_digest) {
      digest_ = other.digest_;
      digest_state_.store(has_digest, std::memory_order_relaxed);
    } else {
      digest_state_.store(no_digest, std::memory_order_relaxed);
    }
    hash_.store(other.hash_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  // A moved-from identity's strings changed: what was derived from them no longer holds.
  void forget_derived() noexcept {
    digest_state_.store(no_digest, std::memory_order_relaxed);
    hash_.store(no_hash, std::memory_order_relaxed);
  }
  std::size_t compute_hash() const noexcept;

  std::string own_scope_;                      // empty when the scope is a static_scope's
  const detail::kept_scope* kept_ = nullptr;  // the static_scope's kept name, or null: own_scope_
  std::string key_;
  mutable std::array<unsigned char, 32> digest_{};
  // Written once, by the first caller of key_digest() that claims it; readers take digest_ only
  // after seeing has_digest.
  mutable std::atomic<std::uint8_t> digest_state_{no_digest};
  mutable std::atomic<std::size_t> hash_{no_hash};  // a value, not a claim: racing writers store the same
};

}  // namespace idem

// Identities as keys of std::unordered_map and friends: identity::hash().
template <>
struct std::hash<idem::identity> {
  std::size_t operator()(const idem::identity& id) const noexcept { return id.hash(); }
};
