// annotator/src/validator.hpp — every rule an `[[idem::idempotent(...)]]` must obey.
//
// A pure function from the attribute as written and the facts about the function it stands
// before to a function_spec or diagnostics. The rules shared with the runtime are the runtime's
// own code: idem::parse_duration, idem::scope_problem, idem::parse_completion_mode. Rules that
// need Clang's Sema (the key expression's type and names, the codec type) are checked by the
// scanner; see docs/annotator.md for the full list.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model.hpp"

namespace idem::annotate {

// The argument names idem::idempotent accepts, in the order the docs list them.
const std::vector<std::string_view>& argument_names();

// The scope a function gets when the attribute sets none: `<SimpleClass>.<method>` for members
// (static or not), the unqualified name for a free function.
std::string default_scope(const function_facts& facts);

// Validates one attribute against the function it stands before. Every error points at the
// offending argument (its name for unknown or duplicated arguments, the offending character of
// its value for bad values) or at the attribute itself for what is missing.
validation_result validate(const raw_attribute& attribute, const function_facts& facts);

// Checks the specs of one translation unit against each other: two functions sharing a scope
// must agree on ttl, lease, waitTimeout, completion, codec and return type, since a duplicate of
// one is answered with the record of the other. Returns an error on the later attribute and a
// note on the earlier one for each conflict.
std::vector<diagnostic> check_scope_conflicts(const std::vector<function_spec>& specs);

// The closest known argument name to `name` (case-insensitive edit distance at most 2), or empty.
std::string suggest_argument(std::string_view name);

}  // namespace idem::annotate
