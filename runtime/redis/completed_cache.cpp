// runtime/redis/completed_cache.cpp — the optional in-process cache of completed records.
#include "completed_cache.hpp"

#include <functional>

namespace idem::detail::redis {

completed_cache::completed_cache(std::size_t max_entries) {
  const std::size_t shard_count = max_entries >= 256 ? 16 : 1;
  per_shard_ = (max_entries + shard_count - 1) / shard_count;
  if (per_shard_ == 0) per_shard_ = 1;
  for (std::size_t i = 0; i < shard_count; ++i) shards_.push_back(std::make_unique<shard>());
}

completed_cache::~completed_cache() = default;

completed_cache::shard& completed_cache::shard_for(const std::string& key) {
  return *shards_[std::hash<std::string>{}(key) % shards_.size()];
}

std::shared_ptr<const completed_entry> completed_cache::find(const std::string& key,
                                                             std::chrono::steady_clock::time_point now) {
  shard& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  auto it = s.slots.find(key);
  if (it == s.slots.end()) return nullptr;
  if (it->second.entry->expires_at <= now) {
    s.recency.erase(it->second.position);
    s.slots.erase(it);
    return nullptr;
  }
  s.recency.splice(s.recency.begin(), s.recency, it->second.position);
  return it->second.entry;
}

void completed_cache::put(const std::string& key, std::shared_ptr<const completed_entry> entry) {
  shard& s = shard_for(key);
  std::shared_ptr<const completed_entry> evicted;  // released outside the lock
  std::lock_guard lock(s.mutex);
  auto it = s.slots.find(key);
  if (it != s.slots.end()) {
    evicted = std::move(it->second.entry);
    it->second.entry = std::move(entry);
    s.recency.splice(s.recency.begin(), s.recency, it->second.position);
    return;
  }
  if (s.slots.size() >= per_shard_) {
    auto victim = s.slots.find(s.recency.back());
    evicted = std::move(victim->second.entry);
    s.slots.erase(victim);
    s.recency.pop_back();
  }
  s.recency.push_front(key);
  s.slots.emplace(key, shard::slot{std::move(entry), s.recency.begin()});
}

void completed_cache::erase(const std::string& key) {
  shard& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  auto it = s.slots.find(key);
  if (it == s.slots.end()) return;
  s.recency.erase(it->second.position);
  s.slots.erase(it);
}

}  // namespace idem::detail::redis
