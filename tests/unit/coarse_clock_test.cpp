// runtime/core/coarse_clock: a deadline far enough ahead is told from the coarse clock, never one
// that may have passed; the coarse system clock is the system clock, a tick late at most.
#include <catch2/catch.hpp>

#include <chrono>
#include <limits>

#include "../../runtime/core/coarse_clock.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

TEST_CASE("coarse clock: the coarse clock is used on Linux, with a margin of four ticks or 20 ms", "[coarse_clock]") {
  // Off, every replay would read the precise clock again: correct, but the shortcut is gone.
  CHECK(idem::detail::coarse_clock_margin() >= 20ms);
}

TEST_CASE("coarse clock: far deadlines are in the future, near and past ones are left to the precise clock",
          "[coarse_clock]") {
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

TEST_CASE("coarse clock: a deadline it calls future is later than the precise clock read just before it",
          "[coarse_clock]") {
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

TEST_CASE("coarse clock: the system clock as of the last tick is never ahead and at most a margin behind",
          "[coarse_clock]") {
  // Not a monotonic or shifted clock passed off as the system clock: a record's completed_at is
  // compared with system_clock readings by its users.
  const auto margin = idem::detail::coarse_clock_margin();
  REQUIRE(margin > 0ns);
  for (int round = 0; round < 10000; ++round) {
    const auto before = std::chrono::system_clock::now();
    const auto coarse = idem::detail::coarse_system_now();
    const auto after = std::chrono::system_clock::now();
    CHECK(coarse <= after);
    CHECK(coarse >= before - margin);
  }
}
