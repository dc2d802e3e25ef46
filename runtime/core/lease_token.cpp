// runtime/core/lease_token.cpp — random lease tokens and their hex and byte forms.
#include <idem/lease_token.hpp>

#include <random>

#include <idem/identity.hpp>

namespace idem {

lease_token lease_token::generate() noexcept {
  // One generator per thread, seeded once from the OS: no lock, no syscall per token.
  thread_local std::mt19937_64 generator{[] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(), device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }()};
  for (;;) {
    const std::uint64_t high = generator();
    const std::uint64_t low = generator();
    if (high != 0 || low != 0) return lease_token(high, low);
  }
}

std::optional<lease_token> lease_token::parse(std::string_view hex) noexcept {
  if (hex.size() != 32) return std::nullopt;
  std::uint64_t parts[2] = {0, 0};
  for (std::size_t i = 0; i < 32; ++i) {
    const char c = hex[i];
    std::uint64_t nibble = 0;
    if (c >= '0' && c <= '9')
      nibble = static_cast<std::uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      nibble = static_cast<std::uint64_t>(c - 'a' + 10);
    else
      return std::nullopt;
    parts[i / 16] = (parts[i / 16] << 4) | nibble;
  }
  return lease_token(parts[0], parts[1]);
}

std::array<unsigned char, 16> lease_token::to_bytes() const noexcept {
  std::array<unsigned char, 16> out{};
  for (std::size_t i = 0; i < 8; ++i) {
    out[i] = static_cast<unsigned char>(high_ >> (56 - 8 * i));
    out[8 + i] = static_cast<unsigned char>(low_ >> (56 - 8 * i));
  }
  return out;
}

std::optional<lease_token> lease_token::from_bytes(std::string_view bytes) noexcept {
  if (bytes.size() != 16) return std::nullopt;
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    high = (high << 8) | static_cast<unsigned char>(bytes[i]);
    low = (low << 8) | static_cast<unsigned char>(bytes[8 + i]);
  }
  return lease_token(high, low);
}

std::string lease_token::to_string() const {
  const std::array<unsigned char, 16> bytes = to_bytes();
  return to_hex(bytes.data(), bytes.size());
}

}  // namespace idem
