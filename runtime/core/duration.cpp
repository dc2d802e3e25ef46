// runtime/core/duration.cpp — formatting durations, and the throwing form of the parser.
#include <idem/duration.hpp>
#include <idem/errors.hpp>

#include <fmt/format.h>

namespace idem {

std::chrono::milliseconds parse_duration_or_throw(std::string_view text, std::string_view what) {
  const duration_parse_result r = parse_duration(text);
  if (!r.ok())
    throw configuration_error(fmt::format("invalid {} \"{}\": {} (at character {}); write an ISO-8601 duration such as "
                                          "\"PT10S\", \"PT5M\" or \"PT1H\"",
                                          what, text, r.message, r.position + 1));
  return r.value;
}

std::string format_duration(std::chrono::milliseconds value) {
  std::int64_t ms = value.count();
  std::string out = ms < 0 ? "-P" : "P";
  if (ms < 0) ms = -ms;
  const std::int64_t days = ms / 86'400'000;
  ms %= 86'400'000;
  const std::int64_t hours = ms / 3'600'000;
  ms %= 3'600'000;
  const std::int64_t minutes = ms / 60'000;
  ms %= 60'000;
  const std::int64_t seconds = ms / 1000;
  const std::int64_t millis = ms % 1000;
  if (days) out += fmt::format("{}D", days);
  if (hours || minutes || seconds || millis || !days) {
    out += 'T';
    if (hours) out += fmt::format("{}H", hours);
    if (minutes) out += fmt::format("{}M", minutes);
    if (seconds || millis || (!hours && !minutes)) {
      if (millis) {
        std::string fraction = fmt::format("{:03}", millis);
        while (fraction.back() == '0') fraction.pop_back();
        out += fmt::format("{}.{}S", seconds, fraction);
      } else {
        out += fmt::format("{}S", seconds);
      }
    }
  }
  return out;
}

}  // namespace idem
