// runtime/redis/sha1.hpp — SHA-1, for the script digests EVALSHA names (Redis computes the same).
#pragma once

#include <string>
#include <string_view>

namespace idem::detail::redis {

// The SHA-1 of `bytes` as 40 lowercase hex characters.
std::string sha1_hex(std::string_view bytes);

}  // namespace idem::detail::redis
