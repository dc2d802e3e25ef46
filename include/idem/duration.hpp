// idem/duration.hpp — the one ISO-8601 duration parser of idem.
//
// Grammar: `P[nD][T[nH][nM][n[.fff]S]]`, designators in that order, each at most once, at least
// one component, fractions on seconds only and no finer than a millisecond. Years, months and
// weeks are refused because their length is ambiguous; signs are refused because no idem
// duration is negative. Designators are case-insensitive, as in java.time.Duration.
//
// The parser is constexpr: idem-annotate runs the very same code at build time that the runtime
// runs when it reads a configuration file.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace idem {

// The result of parse_duration: a value, or the position of the offending character and why.
struct duration_parse_result {
  std::chrono::milliseconds value{0};
  // Index into the input of the character that made it invalid (the input's size when the
  // input ended too early). Meaningless when ok().
  std::size_t position = 0;
  // Empty when the input is valid; otherwise a lowercase message without a final period.
  std::string_view message;

  constexpr bool ok() const noexcept { return message.empty(); }
};

// Parses an ISO-8601 duration such as "PT30S", "PT0.5S", "P1DT12H". Never throws.
[[nodiscard]] constexpr duration_parse_result parse_duration(std::string_view text) noexcept;

// Parses `text` or throws configuration_error whose message names `what` (for example
// "default_ttl"), quotes the text, the position and the reason.
std::chrono::milliseconds parse_duration_or_throw(std::string_view text, std::string_view what);

// Renders a duration in the same ISO-8601 form, for messages and manifests: "PT30S", "PT0.5S",
// "P1DT2H", "PT0S".
std::string format_duration(std::chrono::milliseconds value);

// ---------------------------------------------------------------------------------------------
// Implementation details follow.

namespace detail {

constexpr char upper_ascii(char c) noexcept { return (c >= 'a' && c <= 'z') ? char(c - 'a' + 'A') : c; }
constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

constexpr duration_parse_result duration_error(std::size_t position, std::string_view message) noexcept {
  duration_parse_result r;
  r.position = position;
  r.message = message;
  return r;
}

}  // namespace detail

constexpr duration_parse_result parse_duration(std::string_view text) noexcept {
  using detail::duration_error;
  using detail::is_digit;
  using detail::upper_ascii;
  constexpr std::int64_t max_ms = std::numeric_limits<std::int64_t>::max();

  if (text.empty()) return duration_error(0, "empty duration; expected ISO-8601 such as \"PT30S\"");
  std::size_t i = 0;
  if (text[0] == '-' || text[0] == '+')
    return duration_error(0, "signed durations are not allowed; a duration here is never negative");
  if (upper_ascii(text[0]) != 'P') return duration_error(0, "a duration must start with 'P', as in \"PT30S\"");
  ++i;

  // Rank of each designator, to refuse duplicates and wrong order: D < H < M < S.
  int last_rank = 0;
  bool in_time = false;
  bool any_component = false;
  bool time_component = false;
  std::int64_t total = 0;

  while (i < text.size()) {
    const char c = upper_ascii(text[i]);
    if (c == 'T') {
      if (in_time) return duration_error(i, "duplicate 'T' designator");
      in_time = true;
      ++i;
      if (i == text.size()) return duration_error(i, "'T' must be followed by hours, minutes or seconds");
      continue;
    }
    if (c == '-' || c == '+') return duration_error(i, "signed components are not allowed");
    if (!is_digit(c)) {
      if (c == 'Y' || c == 'W' || (c == 'M' && !in_time))
        return duration_error(i, "years, months and weeks are not allowed: their length is ambiguous; use days, hours, minutes or seconds");
      return duration_error(i, "expected a number");
    }
    // A number: digits, then optionally '.' and up to three fraction digits.
    const std::size_t number_start = i;
    std::int64_t whole = 0;
    while (i < text.size() && is_digit(text[i])) {
      if (whole > (max_ms - (text[i] - '0')) / 10) return duration_error(number_start, "duration is too large");
      whole = whole * 10 + (text[i] - '0');
      ++i;
    }
    std::int64_t fraction_ms = 0;
    bool has_fraction = false;
    std::size_t fraction_start = i;
    if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
      has_fraction = true;
      ++i;
      fraction_start = i;
      int digits = 0;
      while (i < text.size() && is_digit(text[i])) {
        if (digits == 3) {
          if (text[i] != '0') return duration_error(i, "fractions finer than a millisecond are not allowed");
        } else {
          fraction_ms = fraction_ms * 10 + (text[i] - '0');
          ++digits;
        }
        ++i;
      }
      if (digits == 0) return duration_error(fraction_start, "expected digits after the decimal point");
      for (int d = digits; d < 3; ++d) fraction_ms *= 10;
    }
    if (i == text.size()) return duration_error(i, "number without a designator (D, H, M or S)");
    const char designator = upper_ascii(text[i]);
    int rank = 0;
    std::int64_t unit_ms = 0;
    switch (designator) {
      case 'D':
        if (in_time) return duration_error(i, "days must come before 'T'");
        rank = 1;
        unit_ms = 86'400'000;
        break;
      case 'H':
        rank = 2;
        unit_ms = 3'600'000;
        break;
      case 'M':
        rank = 3;
        unit_ms = 60'000;
        break;
      case 'S':
        rank = 4;
        unit_ms = 1'000;
        break;
      case 'Y':
      case 'W':
        return duration_error(i, "years, months and weeks are not allowed: their length is ambiguous; use days, hours, minutes or seconds");
      default:
        return duration_error(i, "unknown designator; expected D, H, M or S");
    }
    if (rank >= 2 && !in_time) {
      if (designator == 'M')
        return duration_error(i, "years, months and weeks are not allowed: their length is ambiguous; for minutes write \"PTnM\"");
      return duration_error(i, "hours, minutes and seconds must come after 'T'");
    }
    if (rank == last_rank) return duration_error(i, "duplicate designator");
    if (rank < last_rank) return duration_error(i, "designators out of order; expected D, then T, then H, M, S");
    if (has_fraction && designator != 'S')
      return duration_error(fraction_start - 1, "only seconds may have a fraction");
    last_rank = rank;
    any_component = true;
    if (in_time) time_component = true;

    // whole * unit_ms + fraction_ms must fit: checked without computing it.
    if (whole > (max_ms - fraction_ms) / unit_ms) return duration_error(number_start, "duration is too large");
    const std::int64_t part = whole * unit_ms + fraction_ms;
    if (total > max_ms - part) return duration_error(number_start, "duration is too large");
    total += part;
    ++i;
  }
  if (in_time && !time_component) return duration_error(text.size(), "'T' must be followed by hours, minutes or seconds");
  if (!any_component) return duration_error(text.size(), "a duration needs at least one component, as in \"PT30S\"");
  duration_parse_result r;
  r.value = std::chrono::milliseconds(total);
  return r;
}

}  // namespace idem
