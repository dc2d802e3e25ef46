// Two headers generated separately whose default scopes coincide: idem-annotate cannot see the
// collision (each header is fine alone), so the engine refuses to start, naming both.
#include <catch2/catch.hpp>
#include <idem/idem.hpp>

#include "billing.idem.hpp"
#include "mailing.idem.hpp"

void billing::handle(const Invoice&) {
  ++handled;
}
void mailing::handle(const Invoice&) {
  ++handled;
}

TEST_CASE("coinciding default scopes of two headers are an error at startup", "[annotator][e2e]") {
  idem::memory_store store;
  CHECK_THROWS_AS(idem::engine{store}, idem::configuration_error);
  // Both functions, where their attributes are (line:column of `idempotent`), and the fix.
  CHECK_THROWS_WITH(idem::engine{store}, Catch::Matchers::Contains("the default scope \"handle\"") &&
                                             Catch::Matchers::Contains("'billing::handle' (") &&
                                             Catch::Matchers::Contains("billing.hpp:8:9)") &&
                                             Catch::Matchers::Contains("'mailing::handle' (") &&
                                             Catch::Matchers::Contains("mailing.hpp:9:9)") &&
                                             Catch::Matchers::Contains("set scope = \"...\" on one of them"));
}
