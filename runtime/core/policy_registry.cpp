// runtime/core/policy_registry.cpp — the process-wide list of annotated functions and the scope-sharing rule.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <idem/duration.hpp>
#include <idem/errors.hpp>
#include <idem/policy_registry.hpp>
#include <map>
#include <mutex>
#include <string_view>

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

namespace {

std::string show(std::string_view function, std::string_view where) {
  return where.empty() ? fmt::format("'{}'", function) : fmt::format("'{}' ({})", function, where);
}

std::string show(const std::optional<std::chrono::milliseconds>& d) {
  return d ? fmt::format("\"{}\"", format_duration(*d)) : std::string("the default");
}

std::string show(const std::optional<completion_mode>& m) {
  return m ? fmt::format("\"{}\"", to_string(*m)) : std::string("the default");
}

}  // namespace

std::string scope_sharing_problem(const scope_claim& earlier, const scope_claim& later) {
  if (earlier.scope != later.scope) return {};
  const std::string first = show(earlier.function, earlier.where);
  const std::string second = show(later.function, later.where);
  if (!earlier.scope_explicit && !later.scope_explicit)
    return fmt::format(
        "the default scope \"{}\" of {} is also the default scope of {}: they would share records, so that after one "
        "runs for a key the other is skipped for that key; set scope = \"...\" on one of them",
        later.scope, second, first);
  std::vector<std::string> differences;
  const call_options& a = earlier.options;
  const call_options& b = later.options;
  if (a.ttl != b.ttl) differences.push_back(fmt::format("ttl {} vs {}", show(b.ttl), show(a.ttl)));
  if (a.lease != b.lease) differences.push_back(fmt::format("lease {} vs {}", show(b.lease), show(a.lease)));
  if (a.wait != b.wait) differences.push_back(fmt::format("waitTimeout {} vs {}", show(b.wait), show(a.wait)));
  if (a.completion != b.completion)
    differences.push_back(fmt::format("completion {} vs {}", show(b.completion), show(a.completion)));
  // Two HTTP endpoints both store the response, whatever their return types.
  const bool both_endpoints = earlier.http_endpoint && later.http_endpoint;
  if (earlier.http_endpoint != later.http_endpoint)
    differences.push_back(later.http_endpoint ? fmt::format("an HTTP endpoint vs return type '{}'", earlier.result_type)
                                              : fmt::format("return type '{}' vs an HTTP endpoint", later.result_type));
  else if (!both_endpoints && earlier.result_type != later.result_type)
    differences.push_back(fmt::format("return type '{}' vs '{}'", later.result_type, earlier.result_type));
  else if (!both_endpoints && earlier.codec != later.codec)
    differences.push_back(fmt::format("codec \"{}\" vs \"{}\"", later.codec, earlier.codec));
  if (differences.empty()) return {};
  return fmt::format(
      "scope \"{}\" of {} is also the scope of {} with different settings ({}): a duplicate of one would be answered "
      "with the record of the other",
      later.scope, second, first, fmt::join(differences, ", "));
}

std::vector<scope_conflict> scope_conflicts(std::span<const scope_claim> claims) {
  std::vector<scope_conflict> out;
  std::map<std::string_view, std::vector<std::size_t>> earlier_by_scope;
  for (std::size_t later = 0; later < claims.size(); ++later) {
    std::vector<std::size_t>& earlier = earlier_by_scope[claims[later].scope];
    for (std::size_t candidate : earlier) {
      std::string problem = scope_sharing_problem(claims[candidate], claims[later]);
      if (problem.empty()) continue;
      out.push_back({candidate, later, std::move(problem)});
      break;
    }
    earlier.push_back(later);
  }
  return out;
}

// idem-annotate refuses conflicts between the functions of one header; functions in different
// headers only meet here, in the process that links them both.
void check_shared_scopes(const std::vector<policy_info>& policies) {
  std::vector<const policy_info*> distinct;
  for (const policy_info& policy : policies) {
    const bool seen = std::any_of(distinct.begin(), distinct.end(), [&](const policy_info* other) {
      return other->function == policy.function && other->file == policy.file && other->line == policy.line &&
             other->column == policy.column;
    });
    if (!seen) distinct.push_back(&policy);
  }
  std::vector<std::string> wheres;
  wheres.reserve(distinct.size());
  for (const policy_info* policy : distinct)
    wheres.push_back(fmt::format("{}:{}:{}", policy->file, policy->line, policy->column));
  std::vector<scope_claim> claims;
  claims.reserve(distinct.size());
  for (std::size_t i = 0; i < distinct.size(); ++i) {
    const policy_info& p = *distinct[i];
    claims.push_back(scope_claim{.function = p.function,
                                 .scope = p.scope,
                                 .scope_explicit = p.scope_explicit,
                                 .options = p.options,
                                 .codec = p.codec,
                                 .result_type = p.result_type,
                                 .http_endpoint = p.http_endpoint,
                                 .where = wheres[i]});
  }
  const std::vector<scope_conflict> conflicts = scope_conflicts(claims);
  if (!conflicts.empty()) throw configuration_error(conflicts.front().message);
}

}  // namespace idem::detail
