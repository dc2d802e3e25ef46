// annotator/src/literal.cpp — see literal.hpp.
#include "literal.hpp"

#include <cstdint>

namespace idem::annotate {

namespace {

bool is_octal(char c) { return c >= '0' && c <= '7'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::uint32_t code, std::string& out) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

}  // namespace

std::optional<std::string> decode_string_literal(std::string_view text, const source_position& start,
                                                 std::string& value, std::vector<source_position>& characters) {
  std::size_t i = 0;
  if (text.starts_with("u8")) i = 2;
  else if (text.starts_with("L") || text.starts_with("u") || text.starts_with("U"))
    return std::string("must be an ordinary string literal, not a wide one");
  bool raw = false;
  if (i < text.size() && text[i] == 'R') {
    raw = true;
    ++i;
  }
  if (text.size() < i + 2 || text.back() != '"' || text[i] != '"')
    return std::string("is not a complete string literal");
  // Where the byte at `index` of the literal was written (raw strings may span lines).
  auto position_at = [&](std::size_t index) {
    source_position p = start;
    for (std::size_t k = 0; k < index; ++k) {
      if (text[k] == '\n') {
        ++p.line;
        p.column = 1;
      } else {
        ++p.column;
      }
    }
    return p;
  };

  if (raw) {
    const std::size_t open = text.find('(', i);
    if (open == std::string_view::npos) return std::string("is a malformed raw string literal");
    const std::string_view delimiter = text.substr(i + 1, open - i - 1);
    // A delimiter is at most 16 characters, none of them a space, a parenthesis, a backslash or a
    // control character; the literal ends with ')', the delimiter again and the quote.
    const bool delimiter_ok =
        delimiter.size() <= 16 && delimiter.find_first_of(" ()\\\t\v\f\n\r") == std::string_view::npos;
    if (!delimiter_ok || text.size() < open + delimiter.size() + 3)
      return std::string("is a malformed raw string literal");
    const std::size_t close = text.size() - 1 - delimiter.size() - 1;  // the ')' before delimiter and quote
    if (text[close] != ')' || text.substr(close + 1, delimiter.size()) != delimiter)
      return std::string("is a malformed raw string literal");
    for (std::size_t k = open + 1; k < close; ++k) {
      value += text[k];
      characters.push_back(position_at(k));
    }
    characters.push_back(position_at(close));
    return std::nullopt;
  }
  ++i;                                      // opening quote
  const std::size_t end = text.size() - 1;  // closing quote
  while (i < end) {
    const source_position here = position_at(i);
    const std::size_t before = value.size();
    char c = text[i];
    if (c == '"' || c == '\n') return std::string("is not a complete string literal");
    if (c != '\\') {
      value += c;
      ++i;
    } else {
      ++i;
      if (i >= end) return std::string("ends in an incomplete escape sequence");
      c = text[i];
      switch (c) {
        case 'n': value += '\n'; ++i; break;
        case 't': value += '\t'; ++i; break;
        case 'r': value += '\r'; ++i; break;
        case 'a': value += '\a'; ++i; break;
        case 'b': value += '\b'; ++i; break;
        case 'f': value += '\f'; ++i; break;
        case 'v': value += '\v'; ++i; break;
        case '\\': case '\'': case '"': case '?': value += c; ++i; break;
        case 'x': {
          ++i;
          unsigned code = 0;
          std::size_t digits = 0;
          for (; i < end && hex_value(text[i]) >= 0; ++i, ++digits) {
            code = code * 16 + static_cast<unsigned>(hex_value(text[i]));
            if (code > 0xFF) return std::string("has a hexadecimal escape sequence out of range");
          }
          if (digits == 0) return std::string("has \\x without hexadecimal digits");
          value += static_cast<char>(code);
          break;
        }
        case 'u': case 'U': {
          const std::size_t length = c == 'u' ? 4 : 8;
          ++i;
          std::uint32_t code = 0;
          for (std::size_t k = 0; k < length; ++k, ++i) {
            if (i >= end || hex_value(text[i]) < 0) return std::string("has an incomplete universal character name");
            code = code * 16 + static_cast<std::uint32_t>(hex_value(text[i]));
          }
          if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
            return std::string("has an invalid universal character name");
          append_utf8(code, value);
          break;
        }
        default:
          if (!is_octal(c)) return std::string("has an unsupported escape sequence");
          {
            unsigned code = 0;
            for (std::size_t digits = 0; digits < 3 && i < end && is_octal(text[i]); ++digits, ++i)
              code = code * 8 + static_cast<unsigned>(text[i] - '0');
            if (code > 0xFF) return std::string("has an octal escape sequence out of range");
            value += static_cast<char>(code);
          }
      }
    }
    // Every byte of what was decoded points at where its character (or escape) starts.
    for (std::size_t k = before; k < value.size(); ++k) characters.push_back(here);
  }
  characters.push_back(position_at(end));
  return std::nullopt;
}

}  // namespace idem::annotate
