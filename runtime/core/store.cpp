// runtime/core/store.cpp — the defaults of idem::store's optional operations.
#include <idem/errors.hpp>
#include <idem/store.hpp>

#include <fmt/format.h>

namespace idem {

void store::complete_in_transaction(const identity& id, const lease_token&, const payload&, std::chrono::milliseconds,
                                    transaction&) {
  throw configuration_error(fmt::format("{} cannot complete {} inside a caller's transaction; use a store that can, "
                                        "such as sqlite_store or postgres_store, or use completion_mode::autonomous",
                                        name(), id.to_string()));
}

bool store::extend_in_transaction(const identity& id, const lease_token& token, std::chrono::milliseconds lease,
                                  transaction&) {
  return extend(id, token, lease);
}

std::string store::join_problem(const transaction&) const {
  return fmt::format("{} cannot complete inside a caller's transaction; use a store that can, such as sqlite_store or "
                     "postgres_store, or completion_mode::autonomous",
                     name());
}

}  // namespace idem
