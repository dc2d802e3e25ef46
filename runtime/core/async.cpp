// runtime/core/async.cpp — idem::cancellation.
#include <idem/async.hpp>

#include <utility>

namespace idem {

void cancellation::request() {
  std::function<void()> handler;
  {
    std::lock_guard lock(mutex_);
    if (requested_) return;
    requested_ = true;
    handler = std::move(handler_);
    handler_ = nullptr;
    if (!handler) return;
    runner_ = std::this_thread::get_id();
  }
  try {
    handler();
  } catch (...) {
    // The operation's handler reports through the operation, never to the requester.
  }
  std::lock_guard lock(mutex_);
  runner_ = std::thread::id();
  finished_.notify_all();
}

bool cancellation::requested() const {
  std::lock_guard lock(mutex_);
  return requested_;
}

bool cancellation::install(std::function<void()> on_request) {
  std::lock_guard lock(mutex_);
  if (requested_) return false;
  handler_ = std::move(on_request);
  return true;
}

void cancellation::clear() {
  std::unique_lock lock(mutex_);
  handler_ = nullptr;
  const std::thread::id self = std::this_thread::get_id();
  finished_.wait(lock, [&] { return runner_ == std::thread::id() || runner_ == self; });
}

}  // namespace idem
