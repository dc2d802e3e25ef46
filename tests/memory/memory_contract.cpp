// tests/memory/memory_contract.cpp — idem::memory_store runs the store contract.
#include <memory>

#include <idem/memory_store.hpp>

#include <idem/testing/async_bridge.hpp>
#include <idem/testing/store_contract.hpp>

// A fresh store per case: nothing else writes to it, so purge counts are checked exactly.
std::unique_ptr<idem::store> idem::contract::make_store() {
  set_backend_exclusive(true);
  return entry_point(std::make_unique<idem::memory_store>());
}
