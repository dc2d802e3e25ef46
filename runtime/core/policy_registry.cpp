#include <idem/policy_registry.hpp>

#include <map>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

#include <idem/errors.hpp>

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

// idem-annotate refuses two functions of one header that share a scope with different settings;
// functions in different headers only meet here, in the process that links them both.
void check_shared_scopes(const std::vector<policy_info>& policies) {
  std::map<std::string_view, const policy_info*> first_by_scope;
  for (const policy_info& policy : policies) {
    auto [it, inserted] = first_by_scope.emplace(policy.scope, &policy);
    if (inserted) continue;
    const policy_info& first = *it->second;
    const call_options& a = first.options;
    const call_options& b = policy.options;
    if (a.ttl == b.ttl && a.lease == b.lease && a.wait == b.wait && a.completion == b.completion) continue;
    throw configuration_error(fmt::format(
        "scope \"{}\" is shared by {} ({}:{}) and {} ({}:{}) with different ttl, lease, waitTimeout or completion: a "
        "duplicate of one would be answered with the record of the other; give them the same settings or different "
        "scopes",
        policy.scope, first.function, first.file, first.line, policy.function, policy.file, policy.line));
  }
}

}  // namespace idem::detail
