// runtime/redis/retry_pacing.hpp — how a call waits out a Redis Cluster that is being reconfigured.
#pragma once

#include <chrono>
#include <optional>

namespace idem::detail::redis {

// idem::detail::redis::retry_pacing
//
// A cluster in the middle of a change answers TRYAGAIN or CLUSTERDOWN, or its masters send a slot's
// commands to each other for a moment (`CLUSTER SETSLOT … NODE` reaches them one at a time at the
// end of a reshard). Such answers are transient: the call tries again after a pause that doubles
// from first_pause up to max_pause, for as long as `budget` allows, counted from the first pause.
// One object per call (or per waiter); not thread-safe.
class retry_pacing {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds first_pause{2};
  static constexpr std::chrono::milliseconds max_pause{100};

  explicit retry_pacing(std::chrono::milliseconds budget) noexcept : budget_(budget) {}

  // The pause to make before the next try, or nullopt when it would end past the budget.
  std::optional<std::chrono::milliseconds> next(clock::time_point now = clock::now());
  // Makes the next pause and returns true; returns false at once when the budget is spent.
  bool pause();
  // The condition is over (a subscription was confirmed): the next pause is the first again.
  void reset() noexcept;

 private:
  std::chrono::milliseconds budget_;
  std::chrono::milliseconds pause_ = first_pause;
  std::optional<clock::time_point> until_;
};

}  // namespace idem::detail::redis
