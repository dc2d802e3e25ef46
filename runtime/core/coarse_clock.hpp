// runtime/core/coarse_clock.hpp — clock readings as of the kernel's last tick, where a tick's
// precision is enough and the precise clock's cost is not.
//
// Why: a precise clock read costs 23-30 ns in some virtual machines (the TSC read traps or is
// scaled), a tenth of a replay on the memory store. Linux keeps both clocks as of its last tick
// (CLOCK_MONOTONIC_COARSE, CLOCK_REALTIME_COARSE), readable in about 6 ns; they lag the precise
// clocks by at most a tick or so.
#pragma once

#include <chrono>

namespace idem::detail {

// True only if `deadline` is certainly later than std::chrono::steady_clock::now(); false when it
// may not be (the caller then reads the precise clock and decides).
//
// A replay only has to know that its record has not expired, and records live for hours. A
// deadline past the coarse monotonic reading plus a generous margin (four ticks, at least 20 ms)
// is in the future; anything closer, and any platform without such a clock, answers false.
[[nodiscard]] bool surely_in_future(std::chrono::steady_clock::time_point deadline) noexcept;

// The margin surely_in_future adds to the coarse reading; zero when it always answers false (no
// coarse clock, or one that disagreed with steady_clock when first read).
[[nodiscard]] std::chrono::nanoseconds coarse_clock_margin() noexcept;

// std::chrono::system_clock as of the kernel's last tick: never later than system_clock::now(),
// at most a tick (4 ms here) earlier. For timestamps that are reported, never compared with a
// deadline (a record's completed_at). system_clock::now() where there is no coarse clock.
[[nodiscard]] std::chrono::system_clock::time_point coarse_system_now() noexcept;

}  // namespace idem::detail
