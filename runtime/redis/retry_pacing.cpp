// runtime/redis/retry_pacing.cpp — the growing pause between tries against a changing cluster.
#include "retry_pacing.hpp"

#include <algorithm>
#include <thread>

#include <idem/deadline.hpp>

namespace idem::detail::redis {

std::optional<std::chrono::milliseconds> retry_pacing::next(clock::time_point now) {
  if (!until_) until_ = saturating_add(now, budget_);
  if (now + pause_ > *until_) return std::nullopt;
  const std::chrono::milliseconds pause = pause_;
  pause_ = std::min(pause_ * 2, max_pause);
  return pause;
}

bool retry_pacing::pause() {
  const std::optional<std::chrono::milliseconds> pause = next();
  if (!pause) return false;
  std::this_thread::sleep_for(*pause);
  return true;
}

void retry_pacing::reset() noexcept {
  pause_ = first_pause;
  until_.reset();
}

}  // namespace idem::detail::redis
