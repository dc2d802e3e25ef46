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

// Decodes one literal: its bytes into `value`, where each was written into `characters`.
class literal_decoder {
 public:
  literal_decoder(std::string_view text, const source_position& start, std::string& value,
                  std::vector<source_position>& characters)
      : text_(text), start_(start), value_(value), characters_(characters) {}

  std::optional<std::string> decode() {
    std::size_t i = 0;
    if (text_.starts_with("u8")) i = 2;
    else if (text_.starts_with("L") || text_.starts_with("u") || text_.starts_with("U"))
      return std::string("must be an ordinary string literal, not a wide one");
    bool raw = false;
    if (i < text_.size() && text_[i] == 'R') {
      raw = true;
      ++i;
    }
    if (text_.size() < i + 2 || text_.back() != '"' || text_[i] != '"')
      return std::string("is not a complete string literal");
    return raw ? decode_raw(i) : decode_quoted(i + 1);
  }

 private:
  // Where the byte at `index` of the literal was written (raw strings may span lines).
  source_position position_at(std::size_t index) const {
    source_position p = start_;
    for (std::size_t k = 0; k < index; ++k) {
      if (text_[k] == '\n') {
        ++p.line;
        p.column = 1;
      } else {
        ++p.column;
      }
    }
    return p;
  }

  // R"delimiter( ... )delimiter", `i` at the opening quote: its bytes as written.
  std::optional<std::string> decode_raw(std::size_t i) {
    const std::size_t open = text_.find('(', i);
    if (open == std::string_view::npos) return std::string("is a malformed raw string literal");
    const std::string_view delimiter = text_.substr(i + 1, open - i - 1);
    // A delimiter is at most 16 characters, none of them a space, a parenthesis, a backslash or a
    // control character; the literal ends with ')', the delimiter again and the quote.
    const bool delimiter_ok =
        delimiter.size() <= 16 && delimiter.find_first_of(" ()\\\t\v\f\n\r") == std::string_view::npos;
    if (!delimiter_ok || text_.size() < open + delimiter.size() + 3)
      return std::string("is a malformed raw string literal");
    const std::size_t close = text_.size() - 1 - delimiter.size() - 1;  // the ')' before delimiter and quote
    if (text_[close] != ')' || text_.substr(close + 1, delimiter.size()) != delimiter)
      return std::string("is a malformed raw string literal");
    for (std::size_t k = open + 1; k < close; ++k) {
      value_ += text_[k];
      characters_.push_back(position_at(k));
    }
    characters_.push_back(position_at(close));
    return std::nullopt;
  }

  // " ... ", `i` after the opening quote: characters and escape sequences.
  std::optional<std::string> decode_quoted(std::size_t i) {
    const std::size_t end = text_.size() - 1;  // closing quote
    while (i < end) {
      const source_position here = position_at(i);
      const std::size_t before = value_.size();
      const char c = text_[i];
      if (c == '"' || c == '\n') return std::string("is not a complete string literal");
      if (c != '\\') {
        value_ += c;
        ++i;
      } else if (std::optional<std::string> problem = decode_escape(++i, end)) {
        return problem;
      }
      // Every byte of what was decoded points at where its character (or escape) starts.
      for (std::size_t k = before; k < value_.size(); ++k) characters_.push_back(here);
    }
    characters_.push_back(position_at(end));
    return std::nullopt;
  }

  // The escape sequence whose backslash is before `i`; leaves `i` after it.
  std::optional<std::string> decode_escape(std::size_t& i, std::size_t end) {
    if (i >= end) return std::string("ends in an incomplete escape sequence");
    const char c = text_[i];
    switch (c) {
      case 'n': value_ += '\n'; ++i; break;
      case 't': value_ += '\t'; ++i; break;
      case 'r': value_ += '\r'; ++i; break;
      case 'a': value_ += '\a'; ++i; break;
      case 'b': value_ += '\b'; ++i; break;
      case 'f': value_ += '\f'; ++i; break;
      case 'v': value_ += '\v'; ++i; break;
      case '\\': case '\'': case '"': case '?': value_ += c; ++i; break;
      case 'x': return decode_hexadecimal(++i, end);
      case 'u': return decode_universal(++i, end, 4);
      case 'U': return decode_universal(++i, end, 8);
      default:
        if (!is_octal(c)) return std::string("has an unsupported escape sequence");
        return decode_octal(i, end);
    }
    return std::nullopt;
  }

  // \x41: as many hexadecimal digits as follow, one byte.
  std::optional<std::string> decode_hexadecimal(std::size_t& i, std::size_t end) {
    unsigned code = 0;
    std::size_t digits = 0;
    for (; i < end && hex_value(text_[i]) >= 0; ++i, ++digits) {
      code = code * 16 + static_cast<unsigned>(hex_value(text_[i]));
      if (code > 0xFF) return std::string("has a hexadecimal escape sequence out of range");
    }
    if (digits == 0) return std::string("has \\x without hexadecimal digits");
    value_ += static_cast<char>(code);
    return std::nullopt;
  }

  // \u00e9 (`length` 4), \U0001F600 (8): a code point, as UTF-8.
  std::optional<std::string> decode_universal(std::size_t& i, std::size_t end, std::size_t length) {
    std::uint32_t code = 0;
    for (std::size_t k = 0; k < length; ++k, ++i) {
      if (i >= end || hex_value(text_[i]) < 0) return std::string("has an incomplete universal character name");
      code = code * 16 + static_cast<std::uint32_t>(hex_value(text_[i]));
    }
    if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
      return std::string("has an invalid universal character name");
    append_utf8(code, value_);
    return std::nullopt;
  }

  // \0, \012: up to three octal digits, one byte.
  std::optional<std::string> decode_octal(std::size_t& i, std::size_t end) {
    unsigned code = 0;
    for (std::size_t digits = 0; digits < 3 && i < end && is_octal(text_[i]); ++digits, ++i)
      code = code * 8 + static_cast<unsigned>(text_[i] - '0');
    if (code > 0xFF) return std::string("has an octal escape sequence out of range");
    value_ += static_cast<char>(code);
    return std::nullopt;
  }

  std::string_view text_;
  const source_position& start_;
  std::string& value_;
  std::vector<source_position>& characters_;
};

}  // namespace

std::optional<std::string> decode_string_literal(std::string_view text, const source_position& start,
                                                 std::string& value, std::vector<source_position>& characters) {
  return literal_decoder(text, start, value, characters).decode();
}

}  // namespace idem::annotate
