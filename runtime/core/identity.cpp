// runtime/core/identity.cpp — scope and key rules, SHA-256, and how a record is rendered.
#include <idem/errors.hpp>
#include <idem/identity.hpp>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <openssl/evp.h>

#include <fmt/format.h>

namespace idem {

std::string scope_problem(std::string_view scope) {
  if (scope.empty()) return "scope must not be empty";
  if (scope.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos) return "scope must not be blank";
  if (scope.size() > max_scope_length)
    return fmt::format("scope must not exceed {} characters, got {}", max_scope_length, scope.size());
  if (scope.find(':') != std::string_view::npos)
    return "scope must not contain ':' (stores compose scope and key with it)";
  return {};
}

std::string key_problem(std::string_view key) {
  if (key.empty()) return "idempotency key must not be empty";
  if (key.size() > max_key_length)
    return fmt::format("idempotency key must not exceed {} bytes, got {}", max_key_length, key.size());
  return {};
}

namespace {
// Fetched once: passing EVP_sha256() makes OpenSSL 3 look the implementation up in its provider
// tables on every call, a measurable share of a replay's client CPU.
const EVP_MD* sha256_implementation() {
  static const EVP_MD* const md = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched != nullptr ? fetched : EVP_sha256();
  }();
  return md;
}

// One digest context per thread, reused: EVP_Digest allocates and frees a context on every call.
struct digest_context {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  digest_context() = default;
  digest_context(const digest_context&) = delete;
  digest_context& operator=(const digest_context&) = delete;
  ~digest_context() { EVP_MD_CTX_free(ctx); }
};
}  // namespace

std::array<unsigned char, 32> sha256(std::string_view bytes) {
  thread_local digest_context local;
  std::array<unsigned char, 32> digest{};
  unsigned int size = 0;
  if (local.ctx == nullptr || EVP_DigestInit_ex2(local.ctx, sha256_implementation(), nullptr) != 1 ||
      EVP_DigestUpdate(local.ctx, bytes.data(), bytes.size()) != 1 ||
      EVP_DigestFinal_ex(local.ctx, digest.data(), &size) != 1 || size != digest.size())
    throw error("SHA-256 failed in libcrypto");
  return digest;
}

void write_hex(char* out, const unsigned char* bytes, std::size_t size) noexcept {
  // Two digits per table entry: one load and one two-byte store per byte (a key's digest is
  // turned into hex on every call of the Redis and PostgreSQL stores).
  static constexpr auto pairs = [] {
    constexpr char digits[] = "0123456789abcdef";
    std::array<char, 512> table{};
    for (std::size_t b = 0; b < 256; ++b) {
      table[2 * b] = digits[b >> 4];
      table[2 * b + 1] = digits[b & 0x0f];
    }
    return table;
  }();
  for (std::size_t i = 0; i < size; ++i) std::memcpy(out + 2 * i, &pairs[2 * std::size_t{bytes[i]}], 2);
}

void append_hex(std::string& out, const unsigned char* bytes, std::size_t size) {
  const std::size_t start = out.size();
  out.resize(start + size * 2);
  write_hex(out.data() + start, bytes, size);
}

std::string to_hex(const unsigned char* bytes, std::size_t size) {
  std::string out;
  append_hex(out, bytes, size);
  return out;
}

namespace {

[[noreturn]] void refuse_scope(std::string_view scope, const std::string& problem) {
  throw configuration_error(fmt::format("invalid scope '{}': {}", scope.substr(0, max_scope_length), problem));
}

[[noreturn]] void refuse_key(std::string_view scope, const std::string& problem) {
  throw invalid_key_error(fmt::format("invalid idempotency key for scope '{}': {}", scope, problem));
}

// Inline on every call's path; the refusals, which format a message, are not.
inline void check_scope(std::string_view scope) {
  if (std::string problem = scope_problem(scope); !problem.empty()) refuse_scope(scope, problem);
}

inline void check_key(std::string_view scope, std::string_view key) {
  if (std::string problem = key_problem(key); !problem.empty()) refuse_key(scope, problem);
}

// The scope's part of identity::hash: one rule for scopes owned and kept.
std::size_t scope_hash(std::string_view scope) noexcept { return std::hash<std::string_view>{}(scope); }

// The kept names of every static_scope: each kept on its own, so it never moves, and never freed,
// since identities referring to a name may be destroyed during the program's exit.
const detail::kept_scope* keep_scope(std::string_view name) {
  struct kept_names {
    std::mutex mutex;
    std::unordered_map<std::string_view, std::unique_ptr<const detail::kept_scope>> names;  // views of the kept names
  };
  static kept_names* const kept = new kept_names;
  std::lock_guard lock(kept->mutex);
  auto it = kept->names.find(name);
  if (it == kept->names.end()) {
    auto entry = std::make_unique<const detail::kept_scope>(detail::kept_scope{std::string(name), scope_hash(name)});
    const std::string_view stable = entry->name;
    it = kept->names.emplace(stable, std::move(entry)).first;
  }
  return it->second.get();
}

}  // namespace

static_scope::static_scope(std::string_view name) {
  check_scope(name);
  kept_ = keep_scope(name);
}

identity::identity(std::string scope, std::string key) : own_scope_(std::move(scope)), key_(std::move(key)) {
  check_scope(own_scope_);
  check_key(own_scope_, key_);
}

identity::identity(static_scope scope, std::string key) : kept_(scope.kept_), key_(std::move(key)) {
  check_key(kept_->name, key_);
}

// Built by appending: `"#" + std::string` inserts at the front, which g++ 12 at -O3 reports as an
// overlapping memcpy (-Wrestrict, a known false positive).
std::string masked_digest(const std::array<unsigned char, 32>& digest) {
  std::string out(1, '#');
  out += to_hex(digest.data(), 4);
  return out;
}

std::array<unsigned char, 32> identity::key_digest() const {
  if (digest_state_.load(std::memory_order_acquire) == has_digest) return digest_;
  const std::array<unsigned char, 32> digest = sha256(key_);
  // The first caller keeps it; a caller that loses the race (another thread is writing) just
  // returns its own, equal, digest.
  std::uint8_t expected = no_digest;
  if (digest_state_.compare_exchange_strong(expected, writing_digest, std::memory_order_acquire)) {
    digest_ = digest;
    digest_state_.store(has_digest, std::memory_order_release);
  }
  return digest;
}

std::size_t identity::compute_hash() const noexcept {
  std::size_t h = std::hash<std::string_view>{}(key_);
  h ^= (kept_ != nullptr ? kept_->hash : scope_hash(own_scope_)) + 0x9e3779b97f4a7c15ULL + (h << 6) +
       (h >> 2);  // boost::hash_combine's step
  if (h == no_hash) h = 1;
  hash_.store(h, std::memory_order_relaxed);
  return h;
}

std::string identity::masked_key() const { return masked_digest(key_digest()); }

std::string identity::to_string() const {
  std::string out;
  out.reserve(scope().size() + 10);
  out.append(scope()).append(1, '/').append(masked_key());
  return out;
}

}  // namespace idem
