// idem_generate passes target_compile_options and CMAKE_CXX_FLAGS to the generator.
#include <catch2/catch.hpp>

#include <idem/idem.hpp>

#include "configured.idem.hpp"

void from_options(int) { ++from_options_runs; }
void from_flags(int) { ++from_flags_runs; }

TEST_CASE("annotations under -D from compile options and CMAKE_CXX_FLAGS are generated", "[annotator][e2e]") {
  idem::memory_store store;
  idem::engine engine{store};
  idem::invoke<&from_options>(engine, 1);
  idem::invoke<&from_options>(engine, 1);
  idem::invoke<&from_flags>(engine, 1);
  idem::invoke<&from_flags>(engine, 1);
  CHECK(from_options_runs == 1);
  CHECK(from_flags_runs == 1);
}
