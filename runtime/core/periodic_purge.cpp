// runtime/core/periodic_purge.cpp — see periodic_purge.hpp.
#include "periodic_purge.hpp"

#include <exception>

#include <fmt/format.h>

#include <idem/deadline.hpp>

namespace idem::detail {

periodic_purge::periodic_purge(store& backing_store, std::chrono::milliseconds interval, log_sink log)
    : store_(backing_store), interval_(interval), log_(std::move(log)), thread_([this] { run(); }) {}

periodic_purge::~periodic_purge() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void periodic_purge::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    const auto next = deadline_after(interval_);
    if (wake_.wait_until(lock, next, [&] { return stopping_; })) return;
    lock.unlock();
    try {
      const std::size_t deleted = store_.purge_expired();
      if (deleted > 0)
        log_({log_level::debug, fmt::format("scheduled purge deleted {} expired records from {}", deleted, store_.name())});
    } catch (const std::exception& e) {
      log_({log_level::warning, fmt::format("scheduled purge of {} failed: {}; trying again in {} ms", store_.name(),
                                            e.what(), interval_.count())});
    } catch (...) {
      log_({log_level::warning, fmt::format("scheduled purge of {} failed; trying again in {} ms", store_.name(),
                                            interval_.count())});
    }
    lock.lock();
  }
}

}  // namespace idem::detail
