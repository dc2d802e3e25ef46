// tests/contract/async_bridge.hpp — a store whose try_acquire, complete and release go through
// another store's asynchronous operations, so that one list of contract cases checks both entry
// points. A store's contract file returns its store through entry_point(); built a second time with
// IDEM_CONTRACT_ASYNC defined (idem_add_async_contract in tests/CMakeLists.txt), every case then
// goes through the asynchronous operations.
#pragma once

#include <exception>
#include <future>
#include <memory>
#include <utility>

#include <idem/store.hpp>

namespace idem::contract {

class async_bridge final : public idem::store {
 public:
  explicit async_bridge(std::unique_ptr<idem::store> inner) : inner_(std::move(inner)) {}

  idem::acquire_result try_acquire(const idem::context& ctx) override {
    auto answer = std::make_shared<std::promise<idem::acquire_result>>();
    inner_->async_try_acquire(ctx, nullptr, [answer](std::exception_ptr error, idem::acquire_result result) {
      if (error) {
        answer->set_exception(error);
      } else {
        answer->set_value(std::move(result));
      }
    });
    return answer->get_future().get();
  }
  void complete(const idem::identity& id, const idem::lease_token& token, const idem::payload& value,
                std::chrono::milliseconds ttl) override {
    wait([&](idem::async_done done) { inner_->async_complete(id, token, value, ttl, std::move(done)); });
  }
  void release(const idem::identity& id, const idem::lease_token& token) override {
    wait([&](idem::async_done done) { inner_->async_release(id, token, std::move(done)); });
  }
  bool extend(const idem::identity& id, const idem::lease_token& token, std::chrono::milliseconds lease) override {
    return inner_->extend(id, token, lease);
  }
  std::size_t purge_expired() override { return inner_->purge_expired(); }
  std::size_t waiting() const noexcept override { return inner_->waiting(); }
  std::string_view name() const noexcept override { return inner_->name(); }

 private:
  template <class Start>
  static void wait(Start&& start) {
    auto finished = std::make_shared<std::promise<void>>();
    start([finished](std::exception_ptr error) {
      if (error) {
        finished->set_exception(error);
      } else {
        finished->set_value();
      }
    });
    finished->get_future().get();
  }

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
