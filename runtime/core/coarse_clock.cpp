// runtime/core/coarse_clock.cpp — surely_in_future and coarse_system_now, on Linux's coarse clocks.
#include "coarse_clock.hpp"

#include <time.h>

#include <algorithm>

namespace idem::detail {

namespace {

using steady = std::chrono::steady_clock;

#if defined(__linux__) && defined(CLOCK_MONOTONIC_COARSE)
std::chrono::nanoseconds read_coarse() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// The margin, or zero to turn the shortcut off: when the coarse clock is missing, or when it is not
// steady_clock's timebase (libstdc++ and libc++ read CLOCK_MONOTONIC; checked, not assumed).
std::chrono::nanoseconds measure_margin() noexcept {
  timespec resolution{};
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &resolution) != 0) return {};
  const auto tick = std::chrono::seconds(resolution.tv_sec) + std::chrono::nanoseconds(resolution.tv_nsec);
  const std::chrono::nanoseconds margin = std::max<std::chrono::nanoseconds>(4 * tick, std::chrono::milliseconds(20));
  const std::chrono::nanoseconds precise = steady::now().time_since_epoch();
  const std::chrono::nanoseconds coarse = read_coarse();
  if (coarse > precise + tick || coarse + margin < precise) return {};
  return margin;
}
#endif

}  // namespace

std::chrono::nanoseconds coarse_clock_margin() noexcept {
#if defined(__linux__) && defined(CLOCK_MONOTONIC_COARSE)
  static const std::chrono::nanoseconds margin = measure_margin();
  return margin;
#else
  return {};
#endif
}

bool surely_in_future(steady::time_point deadline) noexcept {
#if defined(__linux__) && defined(CLOCK_MONOTONIC_COARSE)
  const std::chrono::nanoseconds margin = coarse_clock_margin();
  return margin.count() != 0 && deadline.time_since_epoch() > read_coarse() + margin;
#else
  (void)deadline;
  return false;
#endif
}

std::chrono::system_clock::time_point coarse_system_now() noexcept {
#if defined(__linux__) && defined(CLOCK_REALTIME_COARSE)
  timespec ts{};
  if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) == 0)
    return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
#endif
  return std::chrono::system_clock::now();
}

}  // namespace idem::detail
