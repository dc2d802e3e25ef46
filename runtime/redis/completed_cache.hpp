// runtime/redis/completed_cache.hpp — the optional in-process cache of completed records.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <idem/payload.hpp>

namespace idem::detail::redis {

// What a cached completion answers.
struct completed_entry {
  payload value;
  std::chrono::system_clock::time_point completed_at;
  std::string fingerprint;  // empty = the record has none
  std::chrono::steady_clock::time_point expires_at;  // min(record expiry, cached + max_age)
};

// idem::detail::redis::completed_cache
//
// A bounded LRU map from record key to a completed record, in independently locked shards.
// Holds complete records only (the store never inserts anything else). An entry is served until
// its expires_at on the steady clock and then dropped. Thread-safe.
class completed_cache {
 public:
  explicit completed_cache(std::size_t max_entries);
  ~completed_cache();

  // The live entry for `key`, or null. Refreshes its recency.
  std::shared_ptr<const completed_entry> find(const std::string& key, std::chrono::steady_clock::time_point now);
  // Inserts or replaces the entry for `key`, evicting the least recently used when full.
  void put(const std::string& key, std::shared_ptr<const completed_entry> entry);
  // Drops the entry for `key`, if any.
  void erase(const std::string& key);

 private:
  struct shard {
    std::mutex mutex;
    std::list<std::string> recency;  // front = most recent
    struct slot {
      std::shared_ptr<const completed_entry> entry;
      std::list<std::string>::iterator position;
    };
    std::unordered_map<std::string, slot> slots;
  };
  shard& shard_for(const std::string& key);

  std::vector<std::unique_ptr<shard>> shards_;
  std::size_t per_shard_;
};

}  // namespace idem::detail::redis
