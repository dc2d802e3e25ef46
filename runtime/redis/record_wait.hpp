// runtime/redis/record_wait.hpp — how a duplicate waits for the holder of its record: the steps
// of the wait as a state machine that a blocking and an asynchronous driver run alike.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <variant>

#include <idem/detail/waiter_count.hpp>
#include <idem/store.hpp>

#include "retry_pacing.hpp"
#include "store_impl.hpp"
#include "subscriber.hpp"

namespace idem {

// redis_store::impl::record_wait
//
// A duplicate found its record busy and may wait until `deadline`. It watches the record's
// channel. The first look happened before it watched, so it looks again once the subscription is
// confirmed (at once if it already was: another waiter's); from then on every completion or
// release is a message that changes the snapshot. Without a confirmed subscription it re-checks
// every fallback_recheck. In a cluster the watch is on the master of the record's slot; when a
// look finds the slot served by another master (a resharding, a failover), or that master drops
// the subscription, it watches the new owner and confirms its subscription there before it
// trusts the event again. A subscription lost again and again (masters that disagree about the
// slot for a moment) is renewed with the growing pause a command makes, bounded by the wait.
//
// Each step returns what the driver does next: look (one acquire round trip, then looked()),
// pause until a time (then paused()), wait for the watch to change or a time (then woken()), or
// answer. The machine never blocks (cluster routing aside: a slot map not loaded yet); it is not
// thread-safe: its driver serialises the steps.
class redis_store::impl::record_wait {
 public:
  using clock = std::chrono::steady_clock;
  struct look_request {};
  struct pause_request {
    clock::time_point until;
  };
  struct wait_request {
    clock::time_point until;
  };
  struct answer {
    acquire_result result;
  };
  using step = std::variant<look_request, pause_request, wait_request, answer>;

  // `first` is the look that found the record busy.
  record_wait(impl& store, const context& ctx, const std::string& key, look first, clock::time_point deadline);
  record_wait(const record_wait&) = delete;
  record_wait& operator=(const record_wait&) = delete;

  [[nodiscard]] step start();
  [[nodiscard]] step looked(look next);
  [[nodiscard]] step paused();
  [[nodiscard]] step woken();

  // What a wait_request waits on, and the snapshot it must differ from.
  rd::subscriber::watch& watch() { return *watch_; }
  const rd::subscriber::snapshot& seen() const noexcept { return seen_; }

 private:
  step rewatch(rd::node* owner);
  step wait_or_end();
  answer in_flight_now() const;

  impl& store_;
  const context& ctx_;
  const std::string chan_;
  const int slot_;
  const clock::time_point deadline_;
  const target target_;
  look last_;
  rd::node* watched_ = nullptr;
  std::optional<rd::subscriber::watch> watch_;
  rd::subscriber::snapshot seen_;
  bool look_again_ = false;
  rd::retry_pacing resubscribing_;
  detail::waiter_count::scope counted_;
};

}  // namespace idem
