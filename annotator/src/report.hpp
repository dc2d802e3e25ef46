// annotator/src/report.hpp — printing diagnostics the way Clang does, and checking them against
// expectations written in the source (the equivalent of `clang -verify`, with columns).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model.hpp"

namespace idem::annotate {

// Reads a file's text; empty optional when it cannot be read. Replaceable for tests.
using file_reader = std::function<std::optional<std::string>(const std::string& path)>;
file_reader disk_reader();

// Renders one diagnostic in Clang's format, so that IDEs and build logs link to it:
//   path:12:40: error: invalid lease "PT30": number without a designator (D, H, M or S)
//      12 |   [[idem::idempotent(key = "event.id", lease = "PT30")]]
//         |                                                  ^
// The source lines are omitted when the file cannot be read or the position has no line.
std::string format_diagnostic(const diagnostic& d, const file_reader& read);

// One expectation: `// expected-error@+1:30 {{message}}` (also expected-note, expected-warning;
// `@+N`/`@-N` relative to the comment's line, `@N` absolute, no `@` = the comment's own line).
// The column is required; the message must match exactly.
struct expectation {
  severity level = severity::error;
  unsigned line = 0;
  unsigned column = 0;
  std::string message;
  unsigned written_at = 0;  // the line of the comment
};

struct expectations {
  std::vector<expectation> expected;
  bool no_diagnostics = false;      // `// expected-no-diagnostics`
  std::vector<std::string> errors;  // malformed expectation comments
};

expectations parse_expectations(const std::string& text);

// Compares the diagnostics located in `file` with the expectations; returns one line per
// mismatch (empty = verified). Notes located in other files are not compared.
std::vector<std::string> verify(const expectations& expected, const std::vector<diagnostic>& diagnostics,
                                const std::string& file);

}  // namespace idem::annotate
