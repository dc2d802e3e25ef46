// The string-literal decoder without Clang: values and where each character was written.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "literal.hpp"

namespace {

using namespace idem::annotate;

struct decoded {
  std::optional<std::string> problem;
  std::string value;
  std::vector<source_position> characters;
};

decoded decode(std::string_view text) {
  decoded d;
  d.problem = decode_string_literal(text, {"h.hpp", 3, 10}, d.value, d.characters);
  return d;
}

}  // namespace

TEST_CASE("literal: plain text maps every byte to its column, plus the closing quote", "[annotator][literal]") {
  const decoded d = decode(R"("ab")");
  REQUIRE_FALSE(d.problem);
  CHECK(d.value == "ab");
  REQUIRE(d.characters.size() == 3);
  CHECK(d.characters[0].column == 11);
  CHECK(d.characters[1].column == 12);
  CHECK(d.characters[2].column == 13);
}

TEST_CASE("literal: an octal escape takes up to three digits", "[annotator][literal]") {
  const decoded d = decode(R"("\012x\0\1234")");
  REQUIRE_FALSE(d.problem);
  CHECK(d.value == std::string("\012x") + std::string(1, '\0') + "\1234");
  REQUIRE(d.value.size() == 5);
  CHECK(d.characters[0].column == 11);  // the escape's backslash
  CHECK(d.characters[1].column == 15);  // x
  CHECK(d.characters[2].column == 16);  // \0
  CHECK(d.characters[3].column == 18);  // \123
  CHECK(d.characters[4].column == 22);  // 4
}

TEST_CASE("literal: simple, hexadecimal and universal escapes", "[annotator][literal]") {
  const decoded d = decode(R"("\"\n\x41\u00e9\?")");
  REQUIRE_FALSE(d.problem);
  CHECK(d.value == "\"\nA\xc3\xa9?");
  // Both UTF-8 bytes of \u00e9 point at its backslash.
  CHECK(d.characters[3].column == d.characters[4].column);
  CHECK(decode(R"("\q")").problem == "has an unsupported escape sequence");
  CHECK(decode(R"("\x")").problem == "has \\x without hexadecimal digits");
  CHECK(decode(R"("\x100")").problem == "has a hexadecimal escape sequence out of range");
  CHECK(decode(R"("\777")").problem == "has an octal escape sequence out of range");
}

TEST_CASE("literal: raw and u8 literals, but no wide ones", "[annotator][literal]") {
  const decoded raw = decode(R"--(R"x(a\n)x")--");
  REQUIRE_FALSE(raw.problem);
  CHECK(raw.value == "a\\n");
  CHECK(raw.characters[0].column == 14);
  CHECK(decode(R"(u8"id")").value == "id");
  CHECK(decode(R"(L"id")").problem == "must be an ordinary string literal, not a wide one");
}

// Found by the literal fuzz target (tests/fuzz/corpus/literal/found-unescaped-quote): text that
// is not one complete literal was decoded as if it were. Clang never hands such text over; the
// decoder refuses it anyway instead of inventing a value.
TEST_CASE("literal: text that is not one complete literal is refused", "[annotator][literal]") {
  CHECK(decode(R"(""e")").problem);         // two literals side by side
  CHECK(decode("\"a\nb\"").problem);          // an ordinary literal across a newline
  CHECK(decode(R"--(R"ab(x")--").problem);  // a raw literal without ')' and its delimiter
  CHECK(decode(R"--(R"ab(x)ba")--").problem);  // ... or with another delimiter
  CHECK(decode(R"--(R"a b(x)a b")--").problem);  // a delimiter with a space
  CHECK(decode(R"--(R"12345678901234567(x)12345678901234567")--").problem);  // longer than 16
  const decoded ok = decode(R"--(R"ab(x)")ab")--");  // ')"' inside a raw literal is text
  REQUIRE_FALSE(ok.problem);
  CHECK(ok.value == R"--(x)")--");
}
