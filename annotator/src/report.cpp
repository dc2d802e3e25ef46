// annotator/src/report.cpp — see report.hpp.
#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

namespace idem::annotate {

namespace {

std::string_view level_name(severity level) {
  switch (level) {
    case severity::error: return "error";
    case severity::warning: return "warning";
    case severity::note: return "note";
  }
  return "error";
}

std::optional<std::string> line_of(const std::string& text, unsigned line) {
  std::size_t start = 0;
  for (unsigned current = 1; current < line; ++current) {
    start = text.find('\n', start);
    if (start == std::string::npos) return std::nullopt;
    ++start;
  }
  if (start > text.size()) return std::nullopt;
  const std::size_t end = text.find('\n', start);
  std::string out = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (!out.empty() && out.back() == '\r') out.pop_back();
  return out;
}

}  // namespace

file_reader disk_reader() {
  return [](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  };
}

std::string format_diagnostic(const diagnostic& d, const file_reader& read) {
  std::string out;
  const source_position& p = d.position;
  if (!p.file.empty()) {
    out += p.file;
    if (p.line > 0) {
      out += ":" + std::to_string(p.line);
      if (p.column > 0) out += ":" + std::to_string(p.column);
    }
    out += ": ";
  }
  out += std::string(level_name(d.level)) + ": " + d.message + "\n";
  if (p.file.empty() || p.line == 0 || p.column == 0) return out;
  const std::optional<std::string> text = read(p.file);
  if (!text) return out;
  const std::optional<std::string> source = line_of(*text, p.line);
  if (!source) return out;

  // Like Clang: tabs expand to the next multiple of 8, and the caret follows.
  std::string shown;
  unsigned caret = 0;
  for (std::size_t i = 0; i < source->size(); ++i) {
    if (i + 1 == p.column) caret = static_cast<unsigned>(shown.size());
    if ((*source)[i] == '\t') {
      do shown += ' ';
      while (shown.size() % 8 != 0);
    } else {
      shown += (*source)[i];
    }
  }
  if (p.column > source->size()) caret = static_cast<unsigned>(shown.size() + (p.column - 1 - source->size()));
  char gutter[16];
  std::snprintf(gutter, sizeof gutter, "%5u", p.line);
  out += std::string(gutter) + " | " + shown + "\n";
  out += std::string(5, ' ') + " | " + std::string(caret, ' ') + "^\n";
  return out;
}

expectations parse_expectations(const std::string& text) {
  expectations out;
  static const std::regex directive(R"(expected-(error|warning|note)(@([+-]?)([0-9]+))?(:([0-9]+))?\s*\{\{(.*?)\}\})");
  std::istringstream lines(text);
  std::string line;
  unsigned number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const std::size_t comment = line.find("//");
    if (comment == std::string::npos) continue;
    const std::string body = line.substr(comment);
    if (body.find("expected-no-diagnostics") != std::string::npos) out.no_diagnostics = true;
    std::size_t mentions = 0;
    for (std::size_t at = body.find("expected-"); at != std::string::npos; at = body.find("expected-", at + 1))
      if (body.compare(at, 23, "expected-no-diagnostics") != 0) ++mentions;
    std::size_t matched = 0;
    for (std::sregex_iterator it(body.begin(), body.end(), directive), end; it != end; ++it, ++matched) {
      const std::smatch& m = *it;
      expectation e;
      e.level = m[1] == "error" ? severity::error : m[1] == "warning" ? severity::warning : severity::note;
      e.written_at = number;
      e.line = number;
      if (m[2].matched) {
        const unsigned amount = static_cast<unsigned>(std::stoul(m[4]));
        e.line = m[3] == "+" ? number + amount : m[3] == "-" ? number - amount : amount;
      }
      if (!m[5].matched) {
        out.errors.push_back("line " + std::to_string(number) + ": expectation without a column (write expected-" +
                             std::string(m[1]) + "@+1:COLUMN {{...}})");
        continue;
      }
      e.column = static_cast<unsigned>(std::stoul(m[6]));
      e.message = m[7];
      out.expected.push_back(std::move(e));
    }
    if (matched != mentions)
      out.errors.push_back("line " + std::to_string(number) + ": malformed expectation: " + body);
  }
  return out;
}

std::vector<std::string> verify(const expectations& expected, const std::vector<diagnostic>& diagnostics,
                                const std::string& file) {
  std::vector<std::string> problems = expected.errors;
  std::vector<bool> used(expected.expected.size(), false);
  for (const diagnostic& d : diagnostics) {
    if (d.position.file != file) {
      if (d.level == severity::note) continue;
      problems.push_back("unexpected " + std::string(level_name(d.level)) + " in another file " + d.position.file + ":" +
                         std::to_string(d.position.line) + ":" + std::to_string(d.position.column) + ": " + d.message);
      continue;
    }
    bool found = false;
    for (std::size_t i = 0; i < expected.expected.size(); ++i) {
      const expectation& e = expected.expected[i];
      if (used[i] || e.level != d.level || e.line != d.position.line || e.column != d.position.column ||
          e.message != d.message)
        continue;
      used[i] = true;
      found = true;
      break;
    }
    if (!found)
      problems.push_back("unexpected " + std::string(level_name(d.level)) + " at line " +
                         std::to_string(d.position.line) + ", column " + std::to_string(d.position.column) + ": " +
                         d.message);
  }
  for (std::size_t i = 0; i < expected.expected.size(); ++i) {
    if (used[i]) continue;
    const expectation& e = expected.expected[i];
    problems.push_back("expected " + std::string(level_name(e.level)) + " at line " + std::to_string(e.line) +
                       ", column " + std::to_string(e.column) + " not seen: " + e.message);
  }
  if (expected.expected.empty() && !expected.no_diagnostics)
    problems.push_back("no expectations: write expected-error comments or // expected-no-diagnostics");
  return problems;
}

}  // namespace idem::annotate
