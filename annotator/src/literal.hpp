// annotator/src/literal.hpp — decoding the string literals of an attribute, without Clang.
//
// The frontend hands over the literal exactly as written (prefix, quotes, escapes) and where it
// starts; the decoder returns its bytes and where each byte was written, so that a diagnostic in
// a key expression points at the character the user typed even after an escape sequence.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model.hpp"

namespace idem::annotate {

// Appends the value of the literal `text` (starting at `start`) to `value`, and the position of
// every appended byte to `characters`, then the position of the closing quote. Accepts ordinary
// and u8 literals, raw or not, with every C++ escape: simple ones, octal (\0, \012: up to three
// digits), hexadecimal (\x41) and universal character names (\u00e9, \U0001F600, as UTF-8).
// Returns a message completing "the value of 'key' ..." for a literal idem does not accept.
std::optional<std::string> decode_string_literal(std::string_view text, const source_position& start,
                                                 std::string& value, std::vector<source_position>& characters);

}  // namespace idem::annotate
