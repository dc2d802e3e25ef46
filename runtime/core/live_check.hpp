// runtime/core/live_check.hpp — telling a deadline far in the future without reading the precise clock.
#pragma once

#include <chrono>

namespace idem::detail {

// True only if `deadline` is certainly later than std::chrono::steady_clock::now(); false when it
// may not be (the caller then reads the precise clock and decides).
//
// Why: a replay only has to know that its record has not expired, and records live for hours
// while a precise clock read costs ~30 ns in some virtual machines (the TSC read traps or is
// scaled), a tenth of a replay. Linux keeps the same monotonic clock as of its last tick
// (CLOCK_MONOTONIC_COARSE), readable without the TSC; it lags the precise clock by at most a tick
// or so. A deadline past that reading plus a generous margin (four ticks, at least 20 ms) is in
// the future; anything closer, and any platform without such a clock, answers false.
[[nodiscard]] bool surely_in_future(std::chrono::steady_clock::time_point deadline) noexcept;

// The margin surely_in_future adds to the coarse reading; zero when it always answers false (no
// coarse clock, or one that disagreed with steady_clock when first read).
[[nodiscard]] std::chrono::nanoseconds coarse_clock_margin() noexcept;

}  // namespace idem::detail
