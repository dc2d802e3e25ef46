// idem/memory_store.hpp — the embedded default store: one process, nothing survives a restart.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include <idem/detail/waiter_count.hpp>
#include <idem/store.hpp>

namespace idem {

// Settings of a memory_store.
struct memory_store_options {
  std::size_t shards = 64;  // independent locks; rounded up to a power of two, at least 1
};

// idem::memory_store
//
// Records live in a sharded hash map, each shard behind its own mutex. A duplicate waits on the
// shard's condition variable and wakes when the record completes or is released: no polling.
// Complete records past their ttl are treated as absent and dropped on the next acquisition;
// purge_expired() sweeps the rest. Uses the process's steady clock for leases and expiry and the
// system clock for completed_at. Not transactional.
class memory_store final : public store {
 public:
  explicit memory_store(memory_store_options options = {});
  ~memory_store() override;
  memory_store(const memory_store&) = delete;
  memory_store& operator=(const memory_store&) = delete;

  acquire_result try_acquire(const context& ctx) override;
  void complete(const identity& id, const lease_token& token, const payload& value,
                std::chrono::milliseconds ttl) override;
  void release(const identity& id, const lease_token& token) override;
  bool extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) override;
  std::size_t purge_expired() override;
  std::size_t waiting() const noexcept override { return waiters_.get(); }
  std::string_view name() const noexcept override { return "memory_store"; }

  // How many records the store holds, expired ones included. For tests and metrics.
  std::size_t size() const;

 private:
  struct shard;
  // The shard owning the record whose composite key (`scope ':' key`) hashes to `hash`.
  shard& shard_for(std::size_t hash) const;

  std::unique_ptr<shard[]> shards_;
  std::size_t shard_mask_;
  detail::waiter_count waiters_;
};

}  // namespace idem
