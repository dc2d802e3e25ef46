// runtime/redis/hash_slot.cpp — the Redis Cluster hash slot of a key.
#include "hash_slot.hpp"

#include <array>

namespace idem::detail::redis {
namespace {

// CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster specifies.
constexpr std::array<std::uint16_t, 256> crc16_table = [] {
  std::array<std::uint16_t, 256> table{};
  for (unsigned byte = 0; byte < 256; ++byte) {
    auto crc = static_cast<std::uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[byte] = crc;
  }
  return table;
}();

std::uint16_t crc16(std::string_view bytes) noexcept {
  std::uint16_t crc = 0;
  for (const char c : bytes) {
    const auto index = static_cast<std::uint8_t>((crc >> 8) ^ static_cast<std::uint8_t>(c));
    crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_table[index]);
  }
  return crc;
}

}  // namespace

int hash_slot(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) % slot_count;
}

}  // namespace idem::detail::redis
