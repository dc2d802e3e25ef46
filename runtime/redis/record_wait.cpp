// runtime/redis/record_wait.cpp — how a duplicate waits for the holder of its record.
#include "record_wait.hpp"

#include <algorithm>
#include <utility>

namespace idem {

using std::chrono::milliseconds;

redis_store::impl::record_wait::record_wait(impl& store, const context& ctx, const std::string& key, look first,
                                            clock::time_point deadline)
    : store_(store), ctx_(ctx), chan_(store.channel_for(key)), slot_(store.slot_of(key)), deadline_(deadline),
      target_{"try_acquire", &ctx.id}, last_(std::move(first)), resubscribing_(store.options.command_timeout),
      counted_(store.waiting) {}

redis_store::impl::record_wait::answer redis_store::impl::record_wait::in_flight_now() const {
  return answer{in_flight{remaining_lease(last_.lease_until, clock::now())}};
}

redis_store::impl::record_wait::step redis_store::impl::record_wait::start() {
  return rewatch(&store_.owner_of(target_, slot_));
}

redis_store::impl::record_wait::step redis_store::impl::record_wait::rewatch(rd::node* owner) {
  watched_ = owner;
  watch_.reset();
  watch_.emplace(watched_->hub, chan_);
  seen_ = watch_->state();
  look_again_ = seen_.confirmed;
  if (look_again_) return look_request{};  // another waiter's confirmed subscription: look once more
  return wait_or_end();
}

redis_store::impl::record_wait::step redis_store::impl::record_wait::looked(look next) {
  last_ = std::move(next);
  if (!last_.busy) return answer{std::move(last_.answer)};
  rd::node* const owner = &store_.owner_of(target_, slot_);
  if (seen_.lost) {
    const milliseconds pause = resubscribing_.next().value_or(rd::retry_pacing::max_pause);
    return pause_request{std::min(deadline_, saturating_add(clock::now(), pause))};
  }
  if (owner != watched_) return rewatch(owner);
  return wait_or_end();
}

redis_store::impl::record_wait::step redis_store::impl::record_wait::paused() {
  if (clock::now() >= deadline_) return in_flight_now();
  return rewatch(&store_.owner_of(target_, slot_));
}

redis_store::impl::record_wait::step redis_store::impl::record_wait::wait_or_end() {
  const clock::time_point now = clock::now();
  if (now >= deadline_) return in_flight_now();
  clock::time_point wake_at = std::min(deadline_, saturating_add(last_.lease_until, milliseconds{1}));
  if (!seen_.confirmed) wake_at = std::min(wake_at, saturating_add(now, store_.options.fallback_recheck));
  // Waiting on the event from here when the look followed a confirmed subscription: every
  // completion from then on is a message this wait sees.
  if (seen_.confirmed && look_again_) counted_.begin();
  return wait_request{wake_at};
}

redis_store::impl::record_wait::step redis_store::impl::record_wait::woken() {
  if (clock::now() >= deadline_) return in_flight_now();
  const rd::subscriber::snapshot previous = seen_;
  seen_ = watch_->state();
  if (seen_.confirmed) resubscribing_.reset();
  // A message is only delivered once published after a subscription existed; if it is the
  // completion by the holder this waiter last saw, it is the record's final state (see
  // from_message), whatever else happened to the subscription meanwhile.
  if (seen_.events != previous.events) {
    if (auto result = from_message(ctx_, watch_->last_message(), last_.holder)) {
      store_.message_answers.fetch_add(1, std::memory_order_relaxed);
      return answer{std::move(*result)};
    }
  }
  look_again_ = true;
  return look_request{};
}

}  // namespace idem
