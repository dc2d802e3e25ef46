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

std::string lease_token::to_string() const {
  unsigned char bytes[16];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<unsigned char>(high_ >> (56 - 8 * i));
    bytes[8 + i] = static_cast<unsigned char>(low_ >> (56 - 8 * i));
  }
  return to_hex(bytes, sizeof bytes);
}

}  // namespace idem
