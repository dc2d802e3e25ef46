// tests/unit/faulty_store.hpp — a real memory_store behind a decorator that can inject faults.
//
// Every call goes to the memory store; a test sets a hook to make one operation slow, frozen or
// failing for the records it chooses. Nothing is faked: what the engine sees is what the store did.
#pragma once

#include <functional>
#include <mutex>

#include <idem/memory_store.hpp>

namespace idem::test {

class faulty_store final : public store {
 public:
  // Called before the operation reaches the memory store; may block or throw. Return false from
  // before_extend to skip the extension (as if the holder's process were paused) and answer true.
  std::function<bool(const identity&)> before_extend;
  std::function<void(const identity&)> before_complete;
  std::function<void(const identity&)> before_release;

  acquire_result try_acquire(const context& ctx) override { return inner.try_acquire(ctx); }
  void complete(const identity& id, const lease_token& token, const payload& value,
                std::chrono::milliseconds ttl) override {
    if (before_complete) before_complete(id);
    inner.complete(id, token, value, ttl);
  }
  void release(const identity& id, const lease_token& token) override {
    if (before_release) before_release(id);
    inner.release(id, token);
  }
  bool extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) override {
    if (before_extend && !before_extend(id)) return true;
    return inner.extend(id, token, lease);
  }
  std::size_t purge_expired() override { return inner.purge_expired(); }
  std::size_t waiting() const noexcept override { return inner.waiting(); }
  std::string_view name() const noexcept override { return "faulty_store"; }

  memory_store inner;
};

}  // namespace idem::test
