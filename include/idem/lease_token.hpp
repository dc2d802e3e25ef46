// idem/lease_token.hpp — the fencing token of one acquisition.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem {

// idem::lease_token
//
// 128 random bits issued by a store for every acquisition. complete, release and extend carry it,
// and a store applies them only while the record is still held under the same token: a holder
// whose lease expired and was stolen cannot overwrite or delete the new owner's record.
// A value type; the default-constructed token is all zeros and never issued.
class lease_token {
 public:
  constexpr lease_token() noexcept = default;
  constexpr lease_token(std::uint64_t high, std::uint64_t low) noexcept : high_(high), low_(low) {}

  // A fresh token: a mixed per-thread counter (high word) and a per-thread random stream (low
  // word, from std::random_device), so it repeats none of its thread's tokens and, but for a 2^-64
  // chance per pair of threads, none of another thread's or process's. Every prefix of its hex
  // form changes from token to token. Never zero.
  static lease_token generate() noexcept;

  // Parses the 32-character lowercase hex form written by to_string(); nullopt otherwise.
  static std::optional<lease_token> parse(std::string_view hex) noexcept;

  // 32 lowercase hex characters.
  [[nodiscard]] std::string to_string() const;
  // The characters of to_string() in place, without allocating: for a request that sends them.
  [[nodiscard]] std::array<char, 32> hex() const noexcept;

  // The 16 bytes of the token, big-endian (high word first): how binary columns store it.
  std::array<unsigned char, 16> to_bytes() const noexcept;
  // The token whose to_bytes() is `bytes`; nullopt unless `bytes` has exactly 16 bytes.
  static std::optional<lease_token> from_bytes(std::string_view bytes) noexcept;

  constexpr std::uint64_t high() const noexcept { return high_; }
  constexpr std::uint64_t low() const noexcept { return low_; }

  friend constexpr bool operator==(const lease_token&, const lease_token&) = default;

 private:
  std::uint64_t high_ = 0;
  std::uint64_t low_ = 0;
};

}  // namespace idem
