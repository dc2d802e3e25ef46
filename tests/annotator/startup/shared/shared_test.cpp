// Two headers generated separately that share a scope on purpose: one names it explicitly and the
// settings agree, so the engine starts and both functions use the same records.
#include <catch2/catch.hpp>
#include <idem/idem.hpp>
#include <idem/policy_registry.hpp>

#include "legacy_orders.idem.hpp"
#include "orders.idem.hpp"

void orders::place(const Order&) {
  ++placed;
}
void legacy::place_order(const Order&) {
  ++placed;
}

TEST_CASE("a scope named explicitly in one header may be shared with another's default", "[annotator][e2e]") {
  const auto policies = idem::detail::registered_policies();
  REQUIRE(policies.size() == 2);
  for (const auto& p : policies) CHECK(p.scope_explicit == (p.function == "legacy::place_order"));

  idem::memory_store store;
  idem::engine engine{store};  // does not throw
  idem::invoke<&orders::place>(engine, Order{42});
  idem::invoke<&legacy::place_order>(engine, Order{42});  // the same record: skipped
  CHECK(orders::placed == 1);
  CHECK(legacy::placed == 0);
  idem::invoke<&legacy::place_order>(engine, Order{43});
  CHECK(legacy::placed == 1);
}
