// runtime/core/pending_calls.hpp — what every store's asynchronous try_acquire needs beside its own
// protocol: the calls not answered yet, so that a store being destroyed answers them, and the
// installation of a caller's cancellation.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <utility>

#include <idem/async.hpp>
#include <idem/context.hpp>

namespace idem::detail {

// idem::detail::pending_calls
//
// The asynchronous calls a store started and has not answered. A call adds itself when it starts
// and removes itself when it answers; the store's destructor takes the rest and answers each, so
// that none is left hanging. Thread-safe.
template <class Call>
class pending_calls {
 public:
  // Registers `call`. False when the store is going: the call must end at once, unregistered.
  [[nodiscard]] bool add(std::shared_ptr<Call> call) {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    calls_.insert(std::move(call));
    return true;
  }
  void remove(const std::shared_ptr<Call>& call) {
    std::lock_guard lock(mutex_);
    calls_.erase(call);
  }
  // True once the store is going (take_all ran).
  [[nodiscard]] bool stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
  }
  // The store is going: the calls still pending, for the caller to answer. Later add() fail.
  [[nodiscard]] std::unordered_set<std::shared_ptr<Call>> take_all() {
    std::unordered_set<std::shared_ptr<Call>> left;
    std::lock_guard lock(mutex_);
    stopping_ = true;
    left.swap(calls_);
    return left;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_set<std::shared_ptr<Call>> calls_;
  bool stopping_ = false;
};

// True when a call for `ctx` can be cancelled: it was given a cancellation and may wait.
inline bool can_cancel(const cancellation* cancel, const context& ctx) noexcept {
  return cancel != nullptr && ctx.wait > std::chrono::milliseconds(0);
}

// Installs `on_request` on `cancel` when the call can be cancelled. False when its cancellation
// was requested already: the call then ends with operation_cancelled at once.
template <class Call>
[[nodiscard]] bool install_cancellation(cancellation* cancel, const context& ctx, const std::shared_ptr<Call>& call,
                                        void (Call::*on_request)()) {
  if (!can_cancel(cancel, ctx)) return true;
  return cancel->install([weak = std::weak_ptr<Call>(call), on_request] {
    if (auto self = weak.lock()) ((*self).*on_request)();
  });
}

}  // namespace idem::detail
