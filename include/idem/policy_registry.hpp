// idem/policy_registry.hpp — the process-wide list of annotated functions.
//
// Generated code registers one policy_info per annotated function from a static initializer, so
// that every idem::engine can check all of them against its store and configuration when it is
// constructed (for example join-transaction on a store that cannot complete inside a
// transaction), instead of on the first call.
#pragma once

#include <string_view>
#include <vector>

#include <idem/context.hpp>

namespace idem::detail {

// What the engine needs to know about one annotated function. All strings must outlive the
// program (generated code passes string literals).
struct policy_info {
  std::string_view function;  // qualified name, e.g. "OrderListener::on"
  std::string_view scope;     // e.g. "OrderListener.on"
  call_options options;       // what the attribute set; unset = engine default
  bool http_endpoint = false;
  std::string_view file;      // where the attribute is
  unsigned line = 0;
  unsigned column = 0;
};

// Adds `info` to the registry. Thread-safe. Returns true, so a generated static initializer can
// be `const bool registered = register_policy(...)`.
bool register_policy(const policy_info& info);

// A copy of everything registered so far.
std::vector<policy_info> registered_policies();

// Throws configuration_error if two of `policies` share a scope with different ttl, lease, wait or
// completion: a duplicate of one would be answered with the other's record. idem-annotate reports
// this within one header at build time; the engine's constructor runs it across the program.
void check_shared_scopes(const std::vector<policy_info>& policies);

}  // namespace idem::detail
