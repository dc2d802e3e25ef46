// Saturating deadlines and the one rounding rule for a holder's remaining lease.
#include <catch2/catch.hpp>

#include <idem/deadline.hpp>

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

TEST_CASE("deadline: adding saturates at the clock's end and ignores non-positive durations", "[deadline]") {
  const auto now = steady::now();
  CHECK(idem::saturating_add(now, std::chrono::milliseconds::max()) == steady::time_point::max());
  CHECK(idem::saturating_add(now, 5ms) == now + 5ms);
  CHECK(idem::saturating_add(now, -5ms) == now);
  CHECK(idem::saturating_add(std::int64_t{INT64_MAX - 1}, 5ms) == INT64_MAX);
  CHECK(idem::saturating_add(std::int64_t{10}, 5ms) == 15);
}

TEST_CASE("deadline: a remaining lease is rounded up to whole milliseconds and never negative", "[deadline]") {
  const steady::time_point now{};
  CHECK(idem::remaining_lease(now + 1500us, now) == 2ms);  // truncating would say 1 ms: retried too early
  CHECK(idem::remaining_lease(now + 2ms, now) == 2ms);
  CHECK(idem::remaining_lease(now + 1ns, now) == 1ms);
  CHECK(idem::remaining_lease(now, now) == 0ms);
  CHECK(idem::remaining_lease(now - 3ms, now) == 0ms);
}
