// runtime/sqlite/record_format.hpp — how a record's token and attributes are laid out in columns.
#pragma once

#include <array>
#include <idem/lease_token.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace idem::detail {

// A lease token as 16 bytes: the high then the low 64 bits, big-endian.
std::array<unsigned char, 16> token_bytes(const lease_token& token) noexcept;
// The inverse; nullopt unless `bytes` holds exactly 16 bytes.
std::optional<lease_token> token_from_bytes(std::string_view bytes) noexcept;

using attribute_map = std::map<std::string, std::string, std::less<>>;

// Attributes as a length-prefixed byte string: a 32-bit count, then for every pair the 32-bit
// length and bytes of the name and of the value (little-endian). Any byte may appear in either.
std::string encode_attributes(const attribute_map& attributes);
// The inverse; nullopt if `bytes` is malformed. An empty string decodes to no attributes.
std::optional<attribute_map> decode_attributes(std::string_view bytes);

}  // namespace idem::detail
