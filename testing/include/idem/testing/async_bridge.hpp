// idem/testing/async_bridge.hpp — a store whose try_acquire, complete and release go through
// another store's asynchronous operations, so that one list of contract cases checks both entry
// points. A store's contract file returns its store through entry_point(); built a second time with
// IDEM_CONTRACT_ASYNC defined (idem_add_async_contract in tests/CMakeLists.txt; for a store outside
// this repository, a second executable with that definition), every case then goes through the
// asynchronous operations.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include <idem/store.hpp>

namespace idem::contract {

class async_bridge final : public idem::store {
 public:
  explicit async_bridge(std::unique_ptr<idem::store> inner) : inner_(std::move(inner)) {}

  idem::acquire_result try_acquire(const idem::context& ctx) override {
    auto answer = std::make_shared<handoff<idem::acquire_result>>();
    inner_->async_try_acquire(ctx, nullptr, [answer](std::exception_ptr error, idem::acquire_result result) {
      answer->put(std::move(error), std::move(result));
    });
    return answer->take();
  }
  void complete(const idem::identity& id, const idem::lease_token& token, const idem::payload& value,
                std::chrono::milliseconds ttl) override {
    auto finished = std::make_shared<handoff<bool>>();
    inner_->async_complete(id, token, value, ttl,
                           [finished](std::exception_ptr error) { finished->put(std::move(error), true); });
    finished->take();
  }
  void release(const idem::identity& id, const idem::lease_token& token) override {
    auto finished = std::make_shared<handoff<bool>>();
    inner_->async_release(id, token, [finished](std::exception_ptr error) { finished->put(std::move(error), true); });
    finished->take();
  }
  bool extend(const idem::identity& id, const idem::lease_token& token, std::chrono::milliseconds lease) override {
    return inner_->extend(id, token, lease);
  }
  std::size_t purge_expired() override { return inner_->purge_expired(); }
  std::size_t waiting() const noexcept override { return inner_->waiting(); }
  std::string_view name() const noexcept override { return inner_->name(); }

 private:
  // One answer from the store's thread to the caller's. The caller moves the error out, so that
  // its thread holds the last reference to the exception (not a std::promise, whose shared state,
  // exception included, may die on the store's thread).
  template <class T>
  struct handoff {
    std::mutex mutex;
    std::condition_variable answered;
    bool done = false;
    std::exception_ptr error;
    std::optional<T> value;

    void put(std::exception_ptr e, T v) {
      std::lock_guard lock(mutex);
      error = std::move(e);
      value.emplace(std::move(v));
      done = true;
      answered.notify_one();
    }
    T take() {
      std::unique_lock lock(mutex);
      answered.wait(lock, [&] { return done; });
      if (std::exception_ptr e = std::move(error)) {
        lock.unlock();
        std::rethrow_exception(std::move(e));
      }
      return std::move(*value);
    }
  };

  std::unique_ptr<idem::store> inner_;
};

// The store under test as the contract sees it: through its asynchronous operations when the
// executable is built with IDEM_CONTRACT_ASYNC, else as it is.
inline std::unique_ptr<idem::store> entry_point(std::unique_ptr<idem::store> under_test) {
#ifdef IDEM_CONTRACT_ASYNC
  return std::make_unique<async_bridge>(std::move(under_test));
#else
  return under_test;
#endif
}

}  // namespace idem::contract
