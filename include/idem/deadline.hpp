// idem/deadline.hpp — time arithmetic that saturates instead of overflowing.
//
// Durations in idem have no upper bound (a wait or ttl parsed from "PT9223372036854775S" is
// valid), so `now + wait` may not fit a time_point. Every store computes its deadlines and
// expiries through these functions: one rule, never undefined behaviour.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace idem {

// The longest duration a store writes into a stored expiry, about a century (36525 days); longer
// ones are cut to it. PostgreSQL's timestamps and intervals end within 300 000 years and Lua's
// numbers are doubles, so milliseconds::max() cannot be stored as it is; a record kept for a
// century is kept for as long as anyone asking for "forever" will look.
inline constexpr std::chrono::milliseconds max_stored_duration{3'155'760'000'000};

// `d` cut to [0, max_stored_duration].
constexpr std::chrono::milliseconds stored_duration(std::chrono::milliseconds d) noexcept {
  return d < d.zero() ? d.zero() : d > max_stored_duration ? max_stored_duration : d;
}

// `from + d`, or the clock's last time point if that does not fit; `from` when d is negative or
// zero (no idem duration is negative).
template <class Clock, class ClockDuration, class Rep, class Period>
constexpr std::chrono::time_point<Clock, ClockDuration> saturating_add(
    std::chrono::time_point<Clock, ClockDuration> from, std::chrono::duration<Rep, Period> d) noexcept {
  using point = std::chrono::time_point<Clock, ClockDuration>;
  if (d <= d.zero()) return from;
  const auto room = point::max() - from;  // >= 0 for every `from` a clock hands out
  if (d >= std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(room)) return point::max();
  return from + std::chrono::duration_cast<ClockDuration>(d);
}

// `from_ms + d` in milliseconds, saturated at INT64_MAX: for stores that keep times as integers.
constexpr std::int64_t saturating_add(std::int64_t from_ms, std::chrono::milliseconds d) noexcept {
  const std::int64_t add = d.count();
  if (add <= 0) return from_ms;
  if (from_ms > std::numeric_limits<std::int64_t>::max() - add) return std::numeric_limits<std::int64_t>::max();
  return from_ms + add;
}

// What is left of a lease that ends at `until`, seen at `now`: rounded up to whole milliseconds (a
// caller told to retry after it finds the lease over), never negative. The one rule for every
// store's in_flight::retry_after.
template <class Clock, class ClockDuration>
constexpr std::chrono::milliseconds remaining_lease(std::chrono::time_point<Clock, ClockDuration> until,
                                                    std::chrono::time_point<Clock, ClockDuration> now) noexcept {
  if (until <= now) return std::chrono::milliseconds::zero();
  return std::chrono::ceil<std::chrono::milliseconds>(until - now);
}

// The steady-clock deadline `d` from now, saturated.
inline std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds d) noexcept {
  return saturating_add(std::chrono::steady_clock::now(), d);
}

}  // namespace idem
