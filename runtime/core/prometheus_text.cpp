// runtime/core/prometheus_text.cpp — the text exposition format's syntax, in one place.
#include "prometheus_text.hpp"

#include <iterator>

#include <fmt/format.h>

namespace idem::detail {

namespace {

// Label values escape backslash, double quote and line feed; HELP text backslash and line feed.
void append_escaped(std::string& out, std::string_view text, bool quotes) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

}  // namespace

void exposition_writer::family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  append_escaped(text_, help, false);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
}

void exposition_writer::series(std::string_view name, std::initializer_list<metric_label> labels,
                               const metric_label* extra) {
  text_ += name;
  if (labels.size() == 0 && extra == nullptr) return;
  char separator = '{';
  auto add = [&](const metric_label& label) {
    text_ += separator;
    separator = ',';
    text_ += label.first;
    text_ += "=\"";
    append_escaped(text_, label.second, true);
    text_ += '"';
  };
  for (const metric_label& label : labels) add(label);
  if (extra != nullptr) add(*extra);
  text_ += '}';
}

void exposition_writer::sample(std::string_view name, std::initializer_list<metric_label> labels,
                               std::uint64_t value) {
  series(name, labels, nullptr);
  fmt::format_to(std::back_inserter(text_), " {}\n", value);
}

void exposition_writer::sample(std::string_view name, std::initializer_list<metric_label> labels, double value) {
  series(name, labels, nullptr);
  fmt::format_to(std::back_inserter(text_), " {}\n", value);
}

void exposition_writer::histogram(std::string_view name, std::initializer_list<metric_label> labels,
                                  std::span<const double> bounds, std::span<const std::uint64_t> cumulative,
                                  double sum) {
  const std::string bucket = fmt::format("{}_bucket", name);
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    const std::string le = i < bounds.size() ? fmt::format("{}", bounds[i]) : std::string("+Inf");
    const metric_label le_label{"le", le};
    series(bucket, labels, &le_label);
    fmt::format_to(std::back_inserter(text_), " {}\n", cumulative[i]);
  }
  series(fmt::format("{}_sum", name), labels, nullptr);
  fmt::format_to(std::back_inserter(text_), " {}\n", sum);
  series(fmt::format("{}_count", name), labels, nullptr);
  fmt::format_to(std::back_inserter(text_), " {}\n", cumulative[bounds.size()]);
}

}  // namespace idem::detail
