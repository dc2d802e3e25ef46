// runtime/core/pending_calls.hpp — the asynchronous calls a store has not answered yet, so that a
// store being destroyed answers them (detail::waiting_call registers and removes itself).
#pragma once

#include <memory>
#include <mutex>
#include <unordered_set>
#include <utility>

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

}  // namespace idem::detail
