// runtime/sqlite/record_waiters.cpp
#include "record_waiters.hpp"

#include <algorithm>
#include <idem/deadline.hpp>
#include <utility>

namespace idem::detail {

record_waiters::shard& record_waiters::shard_for(std::string_view record) noexcept {
  return shards_[string_hash{}(record) % shard_count];
}

record_waiters::enrollment record_waiters::enroll(std::string record) {
  shard& s = shard_for(record);
  std::lock_guard lock(s.mutex);
  auto [it, inserted] = s.entries.try_emplace(record);
  ++it->second.waiters;
  return enrollment(s, it->second, std::move(record));
}

void record_waiters::notify(std::string_view record) {
  shard& s = shard_for(record);
  std::vector<std::pair<const void*, std::function<void()>>> due;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.entries.find(record);
    if (it == s.entries.end()) return;
    ++it->second.generation;
    it->second.changed.notify_all();
    due.swap(it->second.listeners);
  }
  for (auto& listener : due) {
    try {
      listener.second();
    } catch (...) {
      // A listener reports through its own operation.
    }
  }
}

std::size_t record_waiters::watched() const {
  std::size_t n = 0;
  for (const shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    n += s.entries.size();
  }
  return n;
}

void record_waiters::hold(const lease_token& token, std::chrono::milliseconds lease) {
  const auto now = std::chrono::steady_clock::now();
  const auto until = saturating_add(now, lease);
  std::lock_guard lock(tokens_mutex_);
  tokens_.insert_or_assign(token, until);
  if (tokens_.size() < next_sweep_) return;
  std::erase_if(tokens_, [&](const auto& held) { return held.second <= now; });
  next_sweep_ = std::max<std::size_t>(1024, 2 * tokens_.size());
}

void record_waiters::drop(const lease_token& token) {
  std::lock_guard lock(tokens_mutex_);
  tokens_.erase(token);
}

bool record_waiters::holds(const lease_token& token) const {
  std::lock_guard lock(tokens_mutex_);
  return tokens_.contains(token);
}

record_waiters::enrollment::enrollment(enrollment&& other) noexcept
    : shard_(std::exchange(other.shard_, nullptr)),
      entry_(std::exchange(other.entry_, nullptr)),
      record_(std::move(other.record_)) {}

record_waiters::enrollment::~enrollment() {
  if (shard_ == nullptr) return;
  std::lock_guard lock(shard_->mutex);
  if (--entry_->waiters == 0) shard_->entries.erase(record_);
}

std::uint64_t record_waiters::enrollment::generation() const {
  std::lock_guard lock(shard_->mutex);
  return entry_->generation;
}

bool record_waiters::enrollment::wait_until(std::uint64_t seen, std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(shard_->mutex);
  return entry_->changed.wait_until(lock, until, [&] { return entry_->generation != seen; });
}

bool record_waiters::enrollment::notify_on_change(std::uint64_t seen, std::function<void()> on_change) {
  std::lock_guard lock(shard_->mutex);
  if (entry_->generation != seen) return false;
  entry_->listeners.emplace_back(this, std::move(on_change));
  return true;
}

void record_waiters::enrollment::cancel_notify() {
  std::function<void()> dropped;  // destroyed outside the lock: it may own anything
  std::lock_guard lock(shard_->mutex);
  auto& listeners = entry_->listeners;
  auto it = std::find_if(listeners.begin(), listeners.end(), [this](const auto& l) { return l.first == this; });
  if (it == listeners.end()) return;
  dropped = std::move(it->second);
  listeners.erase(it);
}

}  // namespace idem::detail
