// idem/identity.hpp — what identifies an idempotency record: a scope and a key.
//
// The scope names the unit of work (default `<Class>.<method>`), the key names the attempt.
// Keys are client data: idem renders a record as `Scope/#xxxxxxxx`, the first four bytes of the
// key's SHA-256 in lowercase hex, in every log line and exception message.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

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

// Appends the lowercase hex of `bytes` to `out`: to_hex without a string of its own, for keys
// composed around a digest.
void append_hex(std::string& out, const unsigned char* bytes, std::size_t size);

// `#xxxxxxxx`: the first four bytes of a key's SHA-256 in lowercase hex, how a key appears in
// every message (identity::masked_key, and records read back by their digest).
std::string masked_digest(const std::array<unsigned char, 32>& digest);

// idem::identity
//
// A validated (scope, key) pair. A value type: cheap to move, compared by content.
class identity {
 public:
  // Throws configuration_error if `scope` breaks the scope rules and invalid_key_error if `key`
  // breaks the key rules. Neither message contains the key.
  identity(std::string scope, std::string key);

  const std::string& scope() const noexcept { return scope_; }
  // The raw key. Client data: never log it.
  const std::string& key() const noexcept { return key_; }

  // SHA-256 of the key. Stores persist this, never the raw key. Computed on each call.
  std::array<unsigned char, 32> key_digest() const { return sha256(key_); }

  // `#xxxxxxxx`: the first four bytes of the key's SHA-256 in lowercase hex.
  std::string masked_key() const;

  // `Scope/#xxxxxxxx`: how a record appears in every message.
  std::string to_string() const;

  friend bool operator==(const identity&, const identity&) = default;

 private:
  std::string scope_;
  std::string key_;
};

}  // namespace idem
