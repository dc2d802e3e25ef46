// tests/support/faulty_store.hpp — a real store behind a decorator that can inject faults.
//
// Every call goes to the real store; a test sets a hook to make one operation slow, frozen or
// failing for the records it chooses. Nothing is faked: what the engine sees is what the store
// did. Set the hooks before the engine uses the store (they are read from its threads).
#pragma once

#include <functional>
#include <mutex>
#include <utility>

#include <idem/memory_store.hpp>
#include <idem/transaction.hpp>

namespace idem::test {

class faulty_store final : public store {
 public:
  // Decorates `inner`, which must outlive it; the default decorates a memory_store of its own.
  faulty_store() : inner_(own_) {}
  explicit faulty_store(store& inner) : inner_(inner) {}

  // Called before the operation reaches the memory store; may block or throw. Return false from
  // before_extend to skip the extension (as if the holder's process were paused) and answer true.
  std::function<bool(const identity&)> before_extend;
  std::function<void(const identity&)> before_complete;
  std::function<void(const identity&)> before_release;
  // Set: asynchronous claims go to the inner store's own asynchronous path, this hook seeing each
  // one first with the cancellation it was handed (null: none). Unset: store's default path.
  std::function<void(const context&, const cancellation*)> before_async_acquire;
  // Set and answering false: the asynchronous operation's handler is destroyed uncalled and the
  // operation does nothing (a store that lost a call); true: the store's default path.
  std::function<bool(const context&)> keep_async_acquire;
  std::function<bool(const identity&)> keep_async_complete;

  acquire_result try_acquire(const context& ctx) override { return inner_.try_acquire(ctx); }
  void async_try_acquire(const context& ctx, cancellation* cancel, async_handler<acquire_result> done) override {
    if (keep_async_acquire && !keep_async_acquire(ctx)) return drop(std::move(done));
    if (!before_async_acquire) return store::async_try_acquire(ctx, cancel, std::move(done));
    before_async_acquire(ctx, cancel);
    inner_.async_try_acquire(ctx, cancel, std::move(done));
  }
  void complete(const identity& id, const lease_token& token, const payload& value,
                std::chrono::milliseconds ttl) override {
    if (before_complete) before_complete(id);
    inner_.complete(id, token, value, ttl);
  }
  void async_complete(const identity& id, const lease_token& token, const payload& value,
                      std::chrono::milliseconds ttl, async_done done) override {
    if (keep_async_complete && !keep_async_complete(id)) return drop(std::move(done));
    store::async_complete(id, token, value, ttl, std::move(done));
  }
  void release(const identity& id, const lease_token& token) override {
    if (before_release) before_release(id);
    inner_.release(id, token);
  }
  bool extend(const identity& id, const lease_token& token, std::chrono::milliseconds lease) override {
    if (before_extend && !before_extend(id)) return true;
    return inner_.extend(id, token, lease);
  }
  bool extend_in_transaction(const identity& id, const lease_token& token, std::chrono::milliseconds lease,
                             transaction& tx) override {
    if (before_extend && !before_extend(id)) return true;
    return inner_.extend_in_transaction(id, token, lease, tx);
  }
  std::size_t purge_expired() override { return inner_.purge_expired(); }
  std::size_t waiting() const noexcept override { return inner_.waiting(); }
  bool supports_transactional_completion() const noexcept override {
    return inner_.supports_transactional_completion();
  }
  std::string join_problem(const transaction& tx) const override { return inner_.join_problem(tx); }
  void complete_in_transaction(const identity& id, const lease_token& token, const payload& value,
                               std::chrono::milliseconds ttl, transaction& tx) override {
    if (before_complete) before_complete(id);
    inner_.complete_in_transaction(id, token, value, ttl, tx);
  }
  std::string_view name() const noexcept override { return inner_.name(); }

 private:
  // Destroys the handler it is given, never calling it.
  template <class Handler>
  static void drop(Handler) {}

  memory_store own_;
  store& inner_;
};

}  // namespace idem::test
