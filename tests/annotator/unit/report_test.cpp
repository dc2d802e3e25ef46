// Printing in Clang's format and the expectation checker, without Clang.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "report.hpp"

namespace {

using namespace idem::annotate;

file_reader fake(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("diagnostics print like Clang's, with the source line and a caret", "[annotator][report]") {
  const std::string source = "struct E {};\n  [[idem::idempotent(key = \"e.id\", lease = \"PT30\")]]\n";
  diagnostic d{severity::error, {"a.hpp", 2, 51}, "invalid lease \"PT30\": number without a designator (D, H, M or S)"};
  CHECK(format_diagnostic(d, fake({{"a.hpp", source}})) ==
        "a.hpp:2:51: error: invalid lease \"PT30\": number without a designator (D, H, M or S)\n"
        "    2 |   [[idem::idempotent(key = \"e.id\", lease = \"PT30\")]]\n"
        "      |                                                   ^\n");
}

TEST_CASE("tabs expand like Clang's and the caret follows", "[annotator][report]") {
  diagnostic d{severity::note, {"a.hpp", 1, 2}, "here"};
  CHECK(format_diagnostic(d, fake({{"a.hpp", "\tx\n"}})) ==
        "a.hpp:1:2: note: here\n"
        "    1 |         x\n"
        "      |         ^\n");
}

TEST_CASE("an unreadable file prints the message alone", "[annotator][report]") {
  diagnostic d{severity::error, {"missing.hpp", 3, 4}, "boom"};
  CHECK(format_diagnostic(d, fake({})) == "missing.hpp:3:4: error: boom\n");
}

TEST_CASE("expectations: relative, absolute, columns and exact messages", "[annotator][report]") {
  const std::string text =
      "// expected-error@+1:5 {{first}}\n"
      "x\n"
      "// expected-note@1:2 {{a note}} expected-warning@-1:7 {{w}}\n";
  expectations e = parse_expectations(text);
  REQUIRE(e.errors.empty());
  REQUIRE(e.expected.size() == 3);
  CHECK(e.expected[0].line == 2);
  CHECK(e.expected[0].column == 5);
  CHECK(e.expected[1].line == 1);
  CHECK(e.expected[2].line == 2);

  std::vector<diagnostic> seen{{severity::error, {"f.hpp", 2, 5}, "first"},
                               {severity::note, {"f.hpp", 1, 2}, "a note"},
                               {severity::warning, {"f.hpp", 2, 7}, "w"}};
  CHECK(verify(e, seen, "f.hpp").empty());

  // A moved column, a changed message, a missing and an unexpected diagnostic all fail.
  seen[0].position.column = 6;
  seen[1].message = "another note";
  auto problems = verify(e, seen, "f.hpp");
  CHECK(problems.size() == 4);
}

TEST_CASE("an expectation without a column is refused", "[annotator][report]") {
  expectations e = parse_expectations("// expected-error@+1 {{x}}\n");
  REQUIRE(e.errors.size() == 1);
  CHECK(e.errors[0].find("without a column") != std::string::npos);
}

TEST_CASE("a file without expectations must say so", "[annotator][report]") {
  CHECK(verify(parse_expectations("int x;\n"), {}, "f.hpp").size() == 1);
  CHECK(verify(parse_expectations("// expected-no-diagnostics\n"), {}, "f.hpp").empty());
}
