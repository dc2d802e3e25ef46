// runtime/redis/hash_slot.hpp — the Redis Cluster hash slot of a key.
#pragma once

#include <cstdint>
#include <string_view>

namespace idem::detail::redis {

inline constexpr int slot_count = 16384;

// The slot Redis Cluster assigns to `key`: CRC16 (XMODEM) modulo 16384 of the key's hash tag — the
// bytes between the first '{' and the first '}' after it, when there are any — or of the whole key.
int hash_slot(std::string_view key) noexcept;

}  // namespace idem::detail::redis
