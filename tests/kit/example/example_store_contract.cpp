// example_store_contract.cpp — the whole store contract on example::counting_store; built with
// IDEM_CONTRACT_ASYNC, through its asynchronous operations.
#include <memory>

#include <idem/testing/async_bridge.hpp>
#include <idem/testing/store_contract.hpp>

#include "example_store.hpp"

// A fresh store per case: nothing else writes to it, so purge counts are checked exactly.
std::unique_ptr<idem::store> idem::contract::make_store() {
  set_backend_exclusive(true);
  return entry_point(std::make_unique<example::counting_store>());
}
