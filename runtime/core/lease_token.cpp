// runtime/core/lease_token.cpp — random lease tokens and their hex and byte forms.
#include <idem/lease_token.hpp>

#include <random>

#include <idem/identity.hpp>

namespace idem {

namespace {

// splitmix64's finalizer: a bijection on 64 bits that spreads every input bit over the output.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A thread's token source, drawn once from the OS: a random non-zero stream and a random start.
struct token_stream {
  std::uint64_t stream = 0;
  std::uint64_t next = 0;

  token_stream() {
    std::random_device device;
    const auto draw = [&device] { return (std::uint64_t{device()} << 32) | device(); };
    while (stream == 0) stream = draw();
    next = draw();
  }
};

}  // namespace

lease_token lease_token::generate() noexcept {
  // (mix(count), stream): a token differs from every other of its thread for 2^64 tokens, and from
  // other threads' and processes' unless two random streams are equal (2^-64 for a pair). Cheaper
  // than drawing 128 random bits per token, and with no birthday bound inside a thread. Never
  // zero, as the stream is not. The changing word leads, so any prefix of the hex form differs
  // from token to token as a fully random token's would (callers cut prefixes for names).
  thread_local token_stream source;
  return lease_token(mix(source.next++), source.stream);
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

std::array<char, 32> lease_token::hex() const noexcept {
  const std::array<unsigned char, 16> bytes = to_bytes();
  std::array<char, 32> digits;
  write_hex(digits.data(), bytes.data(), bytes.size());
  return digits;
}

std::string lease_token::to_string() const {
  const std::array<char, 32> digits = hex();
  return std::string(digits.data(), digits.size());
}

}  // namespace idem
