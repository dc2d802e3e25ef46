// runtime/sqlite/record_waiters.hpp — in-process wake-ups of duplicates waiting for a record.
//
// One condition variable per record that has waiters, in a sharded map. A waiter enrolls before
// it reads the record and remembers the record's generation; a completion or release bumps the
// generation and notifies. A notification between the waiter's read and its wait is therefore
// never lost: the generation has already moved when the waiter looks.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <idem/lease_token.hpp>
#include <mutex>
#include <string>
#include <vector>
#include <utility>
#include <string_view>
#include <unordered_map>

namespace idem::detail {

class record_waiters {
 public:
  class enrollment;

  // Registers a waiter on `record` until the returned enrollment is destroyed.
  enrollment enroll(std::string record);

  // Bumps the generation of `record` and wakes its waiters. Cheap when nobody waits.
  void notify(std::string_view record);

  // Number of records that currently have waiters (for tests).
  std::size_t watched() const;

  // Leases issued by this store that are still held here: a waiter whose holder has one of
  // them is woken by notify() alone and needs no re-check. A lease lost elsewhere (stolen, or
  // completed by another process) is simply not found in the database any more. hold() records
  // (or refreshes) a lease until `lease` from now; leases past that are forgotten in amortized
  // sweeps, so abandoned ones do not accumulate (a forgotten lease only costs its waiters the
  // re-check).
  void hold(const lease_token& token, std::chrono::milliseconds lease);
  void drop(const lease_token& token);
  bool holds(const lease_token& token) const;

 private:
  struct entry {
    std::condition_variable changed;
    std::uint64_t generation = 0;
    std::size_t waiters = 0;
    // Asynchronous waiters to call at the next notify(), by enrollment.
    std::vector<std::pair<const void*, std::function<void()>>> listeners;
  };
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  struct shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, entry, string_hash, std::equal_to<>> entries;
  };
  static constexpr std::size_t shard_count = 16;

  shard& shard_for(std::string_view record) noexcept;

  struct token_hash {
    std::size_t operator()(const lease_token& t) const noexcept {
      return std::hash<std::uint64_t>{}(t.high() ^ (t.low() * 0x9e3779b97f4a7c15ULL));
    }
  };

  std::array<shard, shard_count> shards_;
  mutable std::mutex tokens_mutex_;
  std::unordered_map<lease_token, std::chrono::steady_clock::time_point, token_hash> tokens_;
  std::size_t next_sweep_ = 1024;
};

// RAII registration of one waiter. Move-only.
class record_waiters::enrollment {
 public:
  enrollment(enrollment&& other) noexcept;
  enrollment& operator=(enrollment&&) = delete;
  enrollment(const enrollment&) = delete;
  enrollment& operator=(const enrollment&) = delete;
  ~enrollment();

  // The record's generation now. Read it before reading the record from the database.
  std::uint64_t generation() const;

  // Blocks until the generation differs from `seen` (returns true) or `until` passes (false).
  bool wait_until(std::uint64_t seen, std::chrono::steady_clock::time_point until);
  // The same without blocking: `on_change` is called once, by the notifying thread (without the
  // lock), when the generation moves. Returns false, registering nothing, when it differs from
  // `seen` already. One registration per enrollment at a time.
  [[nodiscard]] bool notify_on_change(std::uint64_t seen, std::function<void()> on_change);
  // Drops the registration if it was not called yet (it may be running now: callers guard).
  void cancel_notify();

 private:
  friend class record_waiters;
  enrollment(shard& owner, entry& watched, std::string record) noexcept
      : shard_(&owner), entry_(&watched), record_(std::move(record)) {}

  shard* shard_;
  entry* entry_;
  std::string record_;
};

}  // namespace idem::detail
