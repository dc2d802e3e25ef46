#include <idem/policy_registry.hpp>

#include <mutex>

namespace idem::detail {
namespace {
// Function-local statics: generated static initializers in other translation units may run
// before this file's globals are initialized.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<policy_info>& registry() {
  static std::vector<policy_info> policies;
  return policies;
}
}  // namespace

bool register_policy(const policy_info& info) {
  std::lock_guard lock(registry_mutex());
  registry().push_back(info);
  return true;
}

std::vector<policy_info> registered_policies() {
  std::lock_guard lock(registry_mutex());
  return registry();
}

}  // namespace idem::detail
