// detail::surely_in_future: a deadline far enough ahead is told from the coarse clock, never one
// that may have passed.
#include <catch2/catch.hpp>

#include <chrono>
#include <limits>

#include "../../runtime/core/live_check.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

TEST_CASE("live check: the coarse clock is used on Linux, with a margin of four ticks or 20 ms", "[live_check]") {
  // Off, every replay would read the precise clock again: correct, but the shortcut is gone.
  CHECK(idem::detail::coarse_clock_margin() >= 20ms);
}

TEST_CASE("live check: far deadlines are in the future, near and past ones are left to the precise clock",
          "[live_check]") {
  using idem::detail::surely_in_future;
  const auto margin = idem::detail::coarse_clock_margin();
  const auto now = steady::now();
  CHECK(surely_in_future(now + 1h));
  CHECK(surely_in_future(steady::time_point::max()));
  CHECK_FALSE(surely_in_future(now));
  CHECK_FALSE(surely_in_future(now - 1s));
  CHECK_FALSE(surely_in_future(steady::time_point::min()));
  CHECK_FALSE(surely_in_future(now + margin / 2));  // within the margin: never decided coarsely
}

TEST_CASE("live check: a deadline it calls future is later than the precise clock read just before it",
          "[live_check]") {
  // The precise clock is read before the check, not after: a thread preempted between the two
  // would otherwise see a correct answer overtaken by time (the check promises "later than now",
  // not "later than whenever the caller looks next").
  const auto margin = idem::detail::coarse_clock_margin();
  REQUIRE(margin > 0ns);
  int decided = 0;
  for (int round = 0; round < 2000; ++round) {
    const auto base = steady::now();
    for (int step = 0; step <= 32; ++step) {
      const auto deadline = base + margin * step / 16;
      const auto before = steady::now();
      if (idem::detail::surely_in_future(deadline)) {
        ++decided;
        CHECK(before < deadline);
      }
    }
  }
  CHECK(decided > 0);  // deadlines two margins ahead are decided coarsely
}
