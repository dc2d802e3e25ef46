// tests/sqlite/required_without_source.cpp — must not compile: idem::guarded<C> of a class with a
// method annotated transaction = "required", constructed without a transaction_source.
#include <idem/engine.hpp>
#include <idem/json_codec.hpp>
#include <idem/memory_store.hpp>

#include "required_ledger.idem.hpp"

void construct_without_source(idem::engine& engine, sqlite3* db) {
  idem::guarded<ledger_test::sqlite_ledger> ledger{engine, db};
  (void)ledger;
}
