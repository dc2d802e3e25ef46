// runtime/postgres/attributes_codec.hpp — payload attributes as bytes for the payload_attributes
// column: each pair as <4-byte big-endian key length><key><4-byte big-endian value length><value>,
// in ascending key order. Byte-exact for any key and value, NULs included.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace idem::detail::pg {

using attribute_map = std::map<std::string, std::string, std::less<>>;

std::string encode_attributes(const attribute_map& attributes);

// Throws corrupt_record_error naming `record` if `bytes` is not a valid encoding.
attribute_map decode_attributes(std::string_view bytes, const std::string& record);

}  // namespace idem::detail::pg
