// runtime/memory/store_parts.hpp — memory_store's shard and waiters, shared by its operations
// (memory_store.cpp) and its waiting (waiting.cpp).
#pragma once

#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <idem/memory_store.hpp>

#include "../core/timer_queue.hpp"
#include "records.hpp"

namespace idem {

using detail::memory::steady;

// A caller waiting for a record's holder: a blocking try_acquire or an async_try_acquire.
// Registered in its shard while it waits; guarded by the shard's mutex.
struct memory_store::waiter {
  waiter(const context& c, cancellation* cancel_request, async_handler<acquire_result> handler)
      : ctx(c), cancel(cancel_request), done(std::move(handler)) {}

  const context ctx;  // its identity keeps its hash
  std::optional<detail::waiter_count::scope> counted;  // while registered
  cancellation* const cancel;  // may be null
  async_handler<acquire_result> done;
  steady::time_point deadline;
  detail::timer_queue::timer timer;
};

struct alignas(64) memory_store::shard {
  std::mutex mutex;
  detail::memory::record_map records;
  std::vector<std::shared_ptr<waiter>> waiters;  // guarded by `mutex`
};

// Answers taken from their shard, handed out once its lock is released.
struct memory_store::ready_list {
  struct entry {
    std::shared_ptr<waiter> who;
    std::exception_ptr error;
    acquire_result result;
  };
  std::vector<entry> entries;

  void add(std::shared_ptr<waiter> who, acquire_result result) {
    entries.push_back({std::move(who), nullptr, std::move(result)});
  }
  void add(std::shared_ptr<waiter> who, std::exception_ptr error) {
    entries.push_back({std::move(who), std::move(error), acquire_result{in_flight{}}});
  }
};

}  // namespace idem
