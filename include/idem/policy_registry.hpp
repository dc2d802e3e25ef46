// idem/policy_registry.hpp — the process-wide list of annotated functions.
//
// Generated code registers one policy_info per annotated function from a static initializer, so
// that every idem::engine can check all of them against its store and configuration when it is
// constructed (for example join-transaction on a store that cannot complete inside a
// transaction), instead of on the first call.
#pragma once

#include <cstddef>
#include <idem/context.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace idem::detail {

// What the engine needs to know about one annotated function. All strings must outlive the
// program (generated code passes string literals).
struct policy_info {
  std::string_view function{};  // qualified name, e.g. "OrderListener::on"
  std::string_view scope{};     // e.g. "OrderListener.on"
  // Whether the attribute named the scope (a non-empty `scope = "..."`). Only a named scope may be
  // shared with another function; two default scopes that coincide are a configuration error.
  bool scope_explicit = false;
  call_options options{};          // what the attribute set; unset = engine default
  std::string_view codec{};        // the codec type as idem-annotate spelled it; empty for void
  std::string_view result_type{};  // the return type, fully qualified ("void" for none)
  bool http_endpoint = false;
  std::string_view file{};  // where the attribute is
  unsigned line = 0;
  unsigned column = 0;
};

// Adds `info` to the registry. Thread-safe. Returns true, so a generated static initializer can
// be `const bool registered = register_policy(...)`.
bool register_policy(const policy_info& info);

// A copy of everything registered so far.
std::vector<policy_info> registered_policies();

// What one function says about the record it writes: everything the rule for sharing a scope
// looks at. idem-annotate builds these from one header's attributes, the engine from the
// registered policies, and both ask scope_sharing_problem / scope_conflicts, so that the rule
// exists once.
struct scope_claim {
  std::string_view function{};  // shown in messages, e.g. "billing::handle"
  std::string_view scope{};
  bool scope_explicit = false;  // the attribute named the scope
  call_options options{};
  std::string_view codec{};  // empty for void functions
  std::string_view result_type{};
  // An HTTP endpoint: its records hold the HTTP response, whichever server's signature (and so
  // return type) it has.
  bool http_endpoint = false;
  std::string_view where{};  // "file:line:column" shown after the name; empty to show none
};

// The rule for two functions with the same scope (`earlier` and `later` in the order they were
// found). They share one record per key, so a duplicate of one is answered with the record of
// the other; that is allowed only on purpose and only when it is harmless:
//   - at least one of them names the scope explicitly (two default scopes that coincide, such as
//     billing::handle and mailing::handle, or two overloads, are an accident), and
//   - they agree on ttl, lease, waitTimeout, completion and what a record holds: the return type
//     and codec, or, for two HTTP endpoints (of either server), the response.
// Returns empty when they may share, else the message (naming both functions, never a key).
// Claims with different scopes never conflict.
std::string scope_sharing_problem(const scope_claim& earlier, const scope_claim& later);

struct scope_conflict {
  std::size_t earlier = 0;  // indices into the claims
  std::size_t later = 0;
  std::string message;  // scope_sharing_problem(claims[earlier], claims[later])
};

// Every claim that may not share its scope with an earlier claim, at most one conflict per later
// claim (with the first earlier claim it conflicts with), in order.
std::vector<scope_conflict> scope_conflicts(std::span<const scope_claim> claims);

// Throws configuration_error for the first conflict among `policies` (scope_conflicts). The same
// function registered twice (same name and location, e.g. from two shared libraries) is one
// function. idem-annotate reports conflicts within one header at build time; the engine's
// constructor runs this across the program.
void check_shared_scopes(const std::vector<policy_info>& policies);

}  // namespace idem::detail

namespace idem {

// The registration is public API: generated .idem.cpp files (and a hand-written policy's
// `registered`) call idem::register_policy(idem::policy_info{...}).
using detail::policy_info;
using detail::register_policy;

}  // namespace idem
