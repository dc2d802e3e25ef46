// tests/redis/redis_contract.cpp — the store contract on a real redis-server.
//
// Cases run in parallel processes against the fixture's one server. Each case's store gets a prefix
// of its own, so it sees only its own records: purge counts are then exact, as on an exclusive
// backend, and one case's purge can never take records another case is about to purge.
#include <idem/testing/async_bridge.hpp>
#include <idem/testing/store_contract.hpp>

#include "redis_support.hpp"

namespace idem::contract {

std::unique_ptr<idem::store> make_store() {
  set_backend_exclusive(true);
  set_backend_expires_complete_records(true);  // a complete record's native expiry is its ttl
  return entry_point(redis_test::fixture_store(redis_test::unique_prefix("contract")));
}

}  // namespace idem::contract
