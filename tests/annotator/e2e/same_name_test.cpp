// Two headers of one name in one idem_generate call are both generated.
#include <catch2/catch.hpp>

#include <idem/idem.hpp>

#include "e2e/a/api.idem.hpp"
#include "e2e/b/api.idem.hpp"

void alpha::ping(int) { ++calls; }
void beta::ping(int) { ++calls; }

TEST_CASE("headers of one name in one idem_generate call are generated side by side", "[annotator][e2e]") {
  idem::memory_store store;
  idem::engine engine{store};
  idem::invoke<&alpha::ping>(engine, 1);
  idem::invoke<&alpha::ping>(engine, 1);
  idem::invoke<&beta::ping>(engine, 1);
  CHECK(alpha::calls == 1);
  CHECK(beta::calls == 1);
}
