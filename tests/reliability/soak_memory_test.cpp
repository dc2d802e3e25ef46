// tests/reliability/soak_memory_test.cpp — the soak (soak.hpp) on the embedded memory_store, whose
// records live in this process: the heap may grow by the records it keeps, and by nothing else.
#include <catch2/catch.hpp>

#include <idem/memory_store.hpp>

#include "reliability/soak.hpp"

TEST_CASE("memory_store: bounded mixed traffic leaks nothing and runs no completed key twice", "[soak]") {
  idem::memory_store store;
  idem::soak::store_probe probe;
  probe.records_in_process = [&store] { return store.size(); };
  idem::soak::run("memory_store", store, probe, idem::soak::settings::from_environment());
}
