// runtime/redis/record_codec.hpp — how payload attributes and numbers travel to the scripts.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <idem/context.hpp>
#include <idem/detail/attributes_codec.hpp>
#include <idem/payload.hpp>

namespace idem::detail::redis {

// A record is one string value (runtime/redis/lua/common.lua has the authority on the layout):
//
//   idem/2 p <claimed at> <lease from> <lease ms> <ttl ms> <fingerprint> <token>\n
//   idem/2 c <completed at> <ttl ms> <fingerprint>\n<payload>
//
// and the payload, once complete, is `<len>:<type><len>:<body><len>:<attributes>` with decimal
// lengths, attributes as encode_attributes writes them.

// The longest header line (its '\n' included) a record can have: an in-progress one with every
// number at its widest (any int64), the longest fingerprint a context accepts and the token's 32
// hex digits. purge.lua reads this much of each value, so it sees the whole header of every valid
// record, and no payload.
inline constexpr std::size_t max_header_length =
    std::string_view("idem/2 p ").size() + 4 * (19 + 1) + max_fingerprint_length + 1 + 32 + 1;

// The payload as the complete script appends it after the header.
std::string encode_payload(const payload& value);

// What a replay needs from a complete record's value.
struct complete_record {
  std::int64_t completed_at_ms = 0;
  std::string fingerprint;  // empty = none
  payload value;
};

// The latest completion time (ms since the epoch) a std::chrono::system_clock::time_point holds.
inline constexpr std::int64_t max_time_point_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::duration::max()).count();

// Parses a complete record's whole value; nullopt when it is not a well-formed complete record
// (including a completion time past max_time_point_ms). Names in the attributes must ascend and
// lengths have no leading zeros, so accepted bytes are exactly what the encoders write.
std::optional<complete_record> decode_complete(std::string_view value);

using attribute_map = idem::detail::attribute_map;  // one map type, one decoding rule (attributes_codec.hpp)

// Attributes as one byte string: for each pair, `<len>:<name><len>:<value>` with decimal
// lengths, in the map's order. Binary-safe; the empty map is the empty string.
std::string encode_attributes(const attribute_map& attributes);

// The inverse; nullopt when `bytes` is not a valid encoding.
std::optional<attribute_map> decode_attributes(std::string_view bytes);

// A non-negative decimal integer; nullopt for anything else (sign, spaces, leading zeros,
// overflow, empty).
std::optional<std::int64_t> parse_int(std::string_view text) noexcept;

// Decimal digits of `value` in a small buffer that lives as long as the object.
class decimal {
 public:
  explicit decimal(std::int64_t value) noexcept {
    auto result = std::to_chars(buffer_, buffer_ + sizeof buffer_, value);
    size_ = static_cast<std::size_t>(result.ptr - buffer_);
  }
  std::string_view view() const noexcept { return std::string_view(buffer_, size_); }

 private:
  char buffer_[24] = {};
  std::size_t size_ = 0;
};

}  // namespace idem::detail::redis
