// Generated registrations are checked when an engine is constructed, not on the first call.
#include <catch2/catch.hpp>

#include <idem/idem.hpp>
#include <idem/policy_registry.hpp>

#include "ledger.idem.hpp"

void post_transfer(const Transfer&) {}

TEST_CASE("join-transaction on a store that cannot is an error at startup", "[annotator][e2e]") {
  idem::memory_store store;
  CHECK_THROWS_AS(idem::engine{store}, idem::configuration_error);
  CHECK_THROWS_WITH(idem::engine{store}, Catch::Matchers::Contains("post_transfer") &&
                                             Catch::Matchers::Contains("join-transaction") &&
                                             Catch::Matchers::Contains("ledger.hpp"));
}
