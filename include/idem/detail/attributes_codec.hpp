// idem/detail/attributes_codec.hpp — payload attributes as bytes, for the stores that keep them in
// one binary column (SQLite, PostgreSQL): every pair as <4-byte big-endian name length><name>
// <4-byte big-endian value length><value>, in ascending name order. Byte-exact for any name and
// value, NULs included. The Redis store's text record keeps its own notation under the same rules.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace idem::detail {

using attribute_map = std::map<std::string, std::string, std::less<>>;

// Throws std::length_error if a name or a value is 4 GiB or longer (its length would not fit).
std::string encode_attributes(const attribute_map& attributes);

// The attributes `bytes` encodes; nullopt if it is truncated, has bytes left over, or repeats a
// name or lists names out of ascending order (an encoder never writes any of these, so the bytes
// were damaged or written by someone else). Accepted bytes are exactly encode_attributes(result).
std::optional<attribute_map> decode_attributes(std::string_view bytes);

// The rule every attribute notation decodes by (this binary one and the Redis store's text one):
// name/value fields taken with `next_field()` (nullopt: damaged) until `at_end()`, names strictly
// ascending as encoders write them, so that a repeated or out-of-order name is damage and each map
// has exactly one encoding.
template <class AtEnd, class NextField>
std::optional<attribute_map> decode_attribute_pairs(AtEnd at_end, NextField next_field) {
  attribute_map out;
  while (!at_end()) {
    const std::optional<std::string_view> name = next_field();
    if (!name) return std::nullopt;
    const std::optional<std::string_view> value = next_field();
    if (!value) return std::nullopt;
    if (!out.empty() && !(out.rbegin()->first < *name)) return std::nullopt;
    out.emplace_hint(out.end(), std::string(*name), std::string(*value));
  }
  return out;
}

}  // namespace idem::detail
