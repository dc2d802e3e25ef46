// idem/detail/waiter_count.hpp — the count behind store::waiting(), kept the same way by every store.
//
//   detail::waiter_count waiters_;                    // a member of the store
//   std::size_t waiting() const noexcept override { return waiters_.get(); }
//
//   detail::waiter_count::scope waiting(waiters_);    // in try_acquire, before its first look
//   ...
//   waiting.begin();  // about to block: the record was found held (and, where the store waits on
//                     // an event, the subscription is in place); idempotent
//   ...               // the destructor ends the count on every way out of try_acquire
#pragma once

#include <atomic>
#include <cstddef>

namespace idem::detail {

class waiter_count {
 public:
  // Callers counted right now.
  std::size_t get() const noexcept { return count_.load(std::memory_order_acquire); }

  // One caller's share of the count: nothing until begin(), then one until destroyed.
  class scope {
   public:
    explicit scope(waiter_count& owner) noexcept : owner_(owner) {}
    ~scope() {
      if (counted_) owner_.count_.fetch_sub(1, std::memory_order_acq_rel);
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

    // Counts the caller from now on; later calls change nothing.
    void begin() noexcept {
      if (counted_) return;
      counted_ = true;
      owner_.count_.fetch_add(1, std::memory_order_acq_rel);
    }

   private:
    waiter_count& owner_;
    bool counted_ = false;
  };

 private:
  std::atomic<std::size_t> count_{0};
};

}  // namespace idem::detail
