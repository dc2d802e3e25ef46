// runtime/core/context.cpp — completion modes, duration bounds and context validation.
#include <idem/context.hpp>
#include <idem/duration.hpp>
#include <idem/errors.hpp>

#include <algorithm>
#include <cctype>
#include <utility>

#include <fmt/format.h>

namespace idem {

std::optional<completion_mode> parse_completion_mode(std::string_view text) noexcept {
  std::string normalized;
  normalized.reserve(text.size());
  for (char c : text) normalized += c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (normalized == "autonomous") return completion_mode::autonomous;
  if (normalized == "join-transaction") return completion_mode::join_transaction;
  return std::nullopt;
}

std::string_view to_string(completion_mode mode) noexcept {
  return mode == completion_mode::autonomous ? "autonomous" : "join-transaction";
}

void context::validate_in_full() const {
  // Rendering the record hashes the key: do it only on the error paths.
  const auto record = [this] { return id.to_string(); };
  const std::pair<duration_field, std::chrono::milliseconds> durations[] = {
      {duration_field::ttl, ttl}, {duration_field::lease, lease}, {duration_field::wait, wait}};
  static constexpr std::string_view names[] = {"ttl", "lease", "wait"};
  for (const auto& [field, value] : durations)
    if (const std::string_view problem = duration_problem(field, value); !problem.empty())
      throw configuration_error(fmt::format("{} of {} is {}: {}", names[static_cast<int>(field)], record(),
                                            format_duration(value), problem));
  if (fingerprint) {
    const std::string& f = *fingerprint;
    if (f.size() < min_fingerprint_length)
      throw configuration_error(fmt::format("request fingerprint of {} must be at least {} hex characters, got {}",
                                            record(), min_fingerprint_length, f.size()));
    if (f.size() > max_fingerprint_length)
      throw configuration_error(fmt::format("request fingerprint of {} must be at most {} hex characters, got {}",
                                            record(), max_fingerprint_length, f.size()));
    if (!std::all_of(f.begin(), f.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }))
      throw configuration_error(fmt::format("request fingerprint of {} must be a hex string", record()));
  }
}

}  // namespace idem
