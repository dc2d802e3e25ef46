// runtime/core/periodic_purge.hpp — the engine's thread that deletes expired records on a schedule.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <idem/log.hpp>
#include <idem/store.hpp>

namespace idem::detail {

// Calls store.purge_expired() every `interval` (the first one interval after construction) on a
// thread of its own, so that a slow purge never delays a heartbeat. A purge that throws is logged
// and tried again one interval later. The destructor stops the thread, waiting for a purge that
// is running.
class periodic_purge {
 public:
  // `interval` > 0; `log` must not throw.
  periodic_purge(store& backing_store, std::chrono::milliseconds interval, log_sink log);
  ~periodic_purge();
  periodic_purge(const periodic_purge&) = delete;
  periodic_purge& operator=(const periodic_purge&) = delete;

 private:
  void run();

  store& store_;
  const std::chrono::milliseconds interval_;
  log_sink log_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace idem::detail
