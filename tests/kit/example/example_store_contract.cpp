// example_store_contract.cpp — the whole store contract on example::counting_store.
#include <memory>

#include <idem/testing/store_contract.hpp>

#include "example_store.hpp"

// A fresh store per case: nothing else writes to it, so purge counts are checked exactly.
std::unique_ptr<idem::store> idem::contract::make_store() {
  set_backend_exclusive(true);
  return std::make_unique<example::counting_store>();
}
