// example_store.hpp — a store written outside idem: the memory store behind a counter of the calls
// it serves. Small on purpose; what matters is that the kit checks it like any of idem's stores.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string_view>

#include <idem/memory_store.hpp>
#include <idem/store.hpp>

namespace example {

class counting_store : public idem::store {
 public:
  idem::acquire_result try_acquire(const idem::context& ctx) override {
    ++calls_;
    return inner_.try_acquire(ctx);
  }
  void complete(const idem::identity& id, const idem::lease_token& token, const idem::payload& value,
                std::chrono::milliseconds ttl) override {
    ++calls_;
    inner_.complete(id, token, value, ttl);
  }
  void release(const idem::identity& id, const idem::lease_token& token) override {
    ++calls_;
    inner_.release(id, token);
  }
  bool extend(const idem::identity& id, const idem::lease_token& token, std::chrono::milliseconds lease) override {
    ++calls_;
    return inner_.extend(id, token, lease);
  }
  std::size_t purge_expired() override { return inner_.purge_expired(); }
  std::size_t waiting() const noexcept override { return inner_.waiting(); }
  std::string_view name() const noexcept override { return "counting_store"; }

  std::size_t calls() const noexcept { return calls_.load(); }

 private:
  idem::memory_store inner_;
  std::atomic<std::size_t> calls_{0};
};

}  // namespace example
