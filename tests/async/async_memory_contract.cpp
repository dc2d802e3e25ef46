// tests/async/async_memory_contract.cpp — the store contract through the memory store's
// asynchronous operations (async_try_acquire, async_complete, async_release).
#include <memory>

#include <idem/memory_store.hpp>

#include "contract/async_bridge.hpp"
#include "contract/store_contract.hpp"

std::unique_ptr<idem::store> idem::contract::make_store() {
  set_backend_exclusive(true);
  return std::make_unique<async_bridge>(std::make_unique<idem::memory_store>());
}
