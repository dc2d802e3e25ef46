// idem/context.hpp — everything one guarded call tells the engine and the store.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <idem/identity.hpp>

namespace idem {

// How the record is completed after the action returns.
enum class completion_mode {
  // Written on its own. Under an active transaction it waits for the commit, and a rollback
  // frees the key.
  autonomous,
  // Written inside the caller's active transaction, on the caller's connection: the record and
  // the business writes commit together. Needs a store that supports it and an active
  // transaction; otherwise the call fails before anything is acquired.
  join_transaction,
};

// Parses "autonomous" / "join-transaction" (case-insensitive, '-' and '_' interchangeable).
// Returns nullopt for anything else.
[[nodiscard]] std::optional<completion_mode> parse_completion_mode(std::string_view text) noexcept;
std::string_view to_string(completion_mode mode) noexcept;

// Limits every context is checked against.
inline constexpr std::chrono::milliseconds min_ttl{1};
inline constexpr std::chrono::milliseconds min_lease{2};  // the heartbeat runs at lease/2

// The durations idem bounds, for duration_problem.
enum class duration_field {
  ttl,       // >= 1 ms: how long a result stays replayable
  lease,     // >= 2 ms: the heartbeat renews it every lease/2
  wait,      // >= 0: how long a duplicate blocks
  interval,  // >= 0: how often a periodic task runs; zero turns it off
};

// Empty if `value` is within the bounds of `field`, otherwise the rule it breaks, as a clause
// such as "a result must stay replayable for at least 1 ms". Used by contexts, the configuration,
// the engine's startup checks and idem-annotate: one place for the bounds and their wording.
// Inline: every call's context is checked against it, twice.
[[nodiscard]] constexpr std::string_view duration_problem(duration_field field, std::chrono::milliseconds value) noexcept {
  switch (field) {
    case duration_field::ttl:
      if (value < min_ttl) return "a result must stay replayable for at least 1 ms";
      break;
    case duration_field::lease:
      if (value < min_lease) return "it must be at least 2 ms because the heartbeat renews it every lease/2";
      break;
    case duration_field::wait:
      if (value < std::chrono::milliseconds::zero()) return "it must not be negative; use PT0S not to block";
      break;
    case duration_field::interval:
      if (value < std::chrono::milliseconds::zero()) return "it must not be negative; use PT0S to turn it off";
      break;
  }
  return {};
}
inline constexpr std::size_t min_fingerprint_length = 16;
inline constexpr std::size_t max_fingerprint_length = 128;  // a SHA-256 in hex is 64

// idem::context
//
// One guarded call: the record's identity, how long its result is replayable (ttl), how long one
// acquisition is protected (lease), how long a duplicate blocks (wait; zero = look once), the
// completion mode and an optional request fingerprint (hex, 16 to 128 characters). An aggregate:
// build it with designated initializers and call validate() before handing it to a store.
struct context {
  identity id;
  std::chrono::milliseconds ttl = std::chrono::hours(24);
  std::chrono::milliseconds lease = std::chrono::seconds(30);
  std::chrono::milliseconds wait = std::chrono::seconds(10);
  completion_mode completion = completion_mode::autonomous;
  std::optional<std::string> fingerprint{};

  // Throws configuration_error naming the field, the value and the rule when ttl < 1 ms,
  // lease < 2 ms, wait < 0, or the fingerprint is shorter than 16, longer than 128 or not hex.
  // Inline for the common case (every call checks its context twice: in make_context and in the
  // engine, since a caller may change it in between); anything to report is found out of line.
  void validate() const {
    if (duration_problem(duration_field::ttl, ttl).empty() && duration_problem(duration_field::lease, lease).empty() &&
        duration_problem(duration_field::wait, wait).empty() && !fingerprint)
      return;
    validate_in_full();
  }

 private:
  void validate_in_full() const;
};

// Per-function settings; an unset member takes the engine's configured default.
struct call_options {
  std::optional<std::chrono::milliseconds> ttl{};
  std::optional<std::chrono::milliseconds> lease{};
  std::optional<std::chrono::milliseconds> wait{};
  std::optional<completion_mode> completion{};
};

}  // namespace idem
