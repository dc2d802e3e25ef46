// tests/redis_cluster/cluster_contract.cpp — the store contract on a real Redis Cluster (3 masters,
// one replica each). Each case's store gets a prefix of its own, so purge counts are exact.
#include <idem/testing/async_bridge.hpp>
#include <idem/testing/store_contract.hpp>

#include "cluster_support.hpp"

namespace idem::contract {

std::unique_ptr<idem::store> make_store() {
  set_backend_exclusive(true);
  set_backend_expires_complete_records(true);  // a complete record's native expiry is its ttl
  static idem::cluster_test::cluster fixture{idem::cluster_test::cluster::fixture_tag{}};
  return entry_point(std::make_unique<idem::redis_store>(fixture.options(idem::cluster_test::unique_prefix("contract"))));
}

}  // namespace idem::contract
