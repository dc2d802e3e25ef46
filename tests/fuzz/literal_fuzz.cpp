// libFuzzer target for the part of idem-annotate's attribute scanner that reads bytes: the string
// literal decoder (annotator/src/literal.hpp, no Clang). Any bytes as a literal "as written".
// decode_string_literal never crashes; a refusal has a message; an accepted literal is complete
// (an ordinary one has no unescaped quote or newline inside, a raw one ends with ')', its
// delimiter and the quote); it gives one position per decoded byte plus the closing quote's, in
// source order, inside the literal; and its value decodes back from a canonical spelling (every
// byte as a three-digit octal escape) to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "literal.hpp"

namespace {

using idem::annotate::source_position;

constexpr unsigned first_line = 3;
constexpr unsigned first_column = 7;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "literal fuzz: %s\n", what);
  std::abort();
}

bool before_or_same(const source_position& a, const source_position& b) {
  return a.line < b.line || (a.line == b.line && a.column <= b.column);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const source_position start{"fuzz.hpp", first_line, first_column};
  std::string value;
  std::vector<source_position> characters;
  if (auto problem = idem::annotate::decode_string_literal(text, start, value, characters)) {
    require(!problem->empty(), "a refusal without a message");
    return 0;
  }
  require(characters.size() == value.size() + 1, "not one position per byte plus the closing quote");
  unsigned newlines = 0;
  for (char c : text) newlines += c == '\n' ? 1 : 0;
  for (std::size_t k = 0; k < characters.size(); ++k) {
    const source_position& p = characters[k];
    require(p.file == start.file, "a position in another file");
    require(p.line >= first_line && p.line <= first_line + newlines, "a position outside the literal's lines");
    require(p.line > first_line || p.column > first_column, "a position at or before the literal's prefix");
    if (k > 0) require(before_or_same(characters[k - 1], p), "positions out of source order");
  }

  const bool raw = text.starts_with("R") || text.starts_with("u8R");
  if (raw) {
    const std::size_t quote = text.find('"');
    const std::size_t open = text.find('(', quote);
    const std::string_view delimiter = text.substr(quote + 1, open - quote - 1);
    require(text.ends_with(")" + std::string(delimiter) + "\""), "a raw literal accepted without its terminator");
  } else {
    const std::size_t quote = text.find('"');
    for (std::size_t k = quote + 1; k + 1 < text.size(); ++k) {
      require(text[k] != '\n', "an ordinary literal accepted across a newline");
      if (text[k] == '\\') {
        ++k;  // the escaped character is never a terminator
        continue;
      }
      require(text[k] != '"', "an ordinary literal accepted with an unescaped quote inside");
    }
  }

  std::string canonical = "\"";
  for (unsigned char byte : value) {
    char escape[5];
    std::snprintf(escape, sizeof escape, "\\%03o", byte);
    canonical += escape;
  }
  canonical += '"';
  std::string again;
  std::vector<source_position> again_characters;
  require(!idem::annotate::decode_string_literal(canonical, start, again, again_characters), "the canonical spelling is refused");
  require(again == value, "the canonical spelling decodes to other bytes");
  return 0;
}
