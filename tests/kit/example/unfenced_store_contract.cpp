// unfenced_store_contract.cpp — example::counting_store with its fencing taken out: complete and
// release act with the newest lease token of the record instead of the caller's, so a holder
// whose lease was stolen overwrites the new owner. The contract must fail it.
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include <idem/testing/store_contract.hpp>

#include "example_store.hpp"

namespace {

class unfenced_store final : public example::counting_store {
 public:
  idem::acquire_result try_acquire(const idem::context& ctx) override {
    idem::acquire_result result = counting_store::try_acquire(ctx);
    if (const auto* won = std::get_if<idem::acquired>(&result)) {
      std::lock_guard lock(mutex_);
      newest_[{ctx.id.scope(), ctx.id.key()}] = won->token;
    }
    return result;
  }
  void complete(const idem::identity& id, const idem::lease_token& token, const idem::payload& value,
                std::chrono::milliseconds ttl) override {
    counting_store::complete(id, newest(id, token), value, ttl);
  }
  void release(const idem::identity& id, const idem::lease_token& token) override {
    counting_store::release(id, newest(id, token));
  }

 private:
  idem::lease_token newest(const idem::identity& id, const idem::lease_token& fallback) {
    std::lock_guard lock(mutex_);
    auto found = newest_.find({id.scope(), id.key()});
    return found == newest_.end() ? fallback : found->second;
  }

  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, idem::lease_token> newest_;
};

}  // namespace

std::unique_ptr<idem::store> idem::contract::make_store() {
  set_backend_exclusive(true);
  return std::make_unique<unfenced_store>();
}
