// annotator/src/validator.cpp — see validator.hpp.
#include "validator.hpp"

#include <algorithm>
#include <cctype>

#include <idem/policy_registry.hpp>

#include "validator_rules.hpp"

namespace idem::annotate {

source_position raw_argument::character(std::size_t index) const {
  if (value_characters.empty()) return value_position;
  return value_characters[std::min(index, value_characters.size() - 1)];
}

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

diagnostic error_at(source_position where, std::string message) {
  return diagnostic{severity::error, std::move(where), std::move(message)};
}

diagnostic note_at(source_position where, std::string message) {
  return diagnostic{severity::note, std::move(where), std::move(message)};
}

bool has_error(const std::vector<diagnostic>& diagnostics) {
  return std::any_of(diagnostics.begin(), diagnostics.end(),
                     [](const diagnostic& d) { return d.level == severity::error; });
}

}  // namespace

const std::vector<std::string_view>& argument_names() {
  static const std::vector<std::string_view> names{"key",        "scope", "ttl",        "lease",
                                                   "waitTimeout", "completion", "transaction", "codec"};
  return names;
}

std::string suggest_argument(std::string_view name) {
  std::string best;
  std::size_t best_distance = 3;
  for (std::string_view candidate : argument_names()) {
    const std::size_t distance = edit_distance(lower(name), lower(candidate));
    if (distance < best_distance) {
      best_distance = distance;
      best = std::string(candidate);
    }
  }
  return best;
}

std::string default_scope(const function_facts& facts) {
  if (facts.kind == function_kind::free) return facts.name;
  return facts.simple_class + "." + facts.name;
}

validation_state::validation_state(const raw_attribute& written, const function_facts& about,
                                   std::vector<diagnostic>& diagnostics)
    : attribute(written),
      facts(about),
      attribute_name(written.spelling.empty() ? "idem::idempotent" : written.spelling),
      out(diagnostics) {
  spec.facts = about;
  spec.position = written.position;
}

const raw_argument* validation_state::find(std::string_view name) const {
  auto it = given.find(name);
  return it == given.end() ? nullptr : it->second;
}

void validation_state::error(source_position where, std::string message) {
  out.push_back(error_at(std::move(where), std::move(message)));
}

void validation_state::note(source_position where, std::string message) {
  out.push_back(note_at(std::move(where), std::move(message)));
}

std::string display_name(const function_facts& facts) { return "'" + facts.qualified_name + "'"; }

source_position value_start(const raw_argument& argument) { return argument.character(0); }

// The rules of validator_rules.hpp, table by table.
validation_result validate(const raw_attribute& attribute, const function_facts& facts) {
  validation_result result;
  validation_state state(attribute, facts, result.diagnostics);
  for (const function_rule& rule : function_rules())
    if (rule.check(state)) return result;
  const std::span<const name_rule> names = name_rules();
  for (const raw_argument& argument : attribute.arguments) {
    const auto reports = [&](const name_rule& rule) { return rule.check(state, argument); };
    if (std::none_of(names.begin(), names.end(), reports)) state.given.emplace(argument.name, &argument);
  }
  for (const setting_rule& rule : setting_rules()) rule.check(state);
  result.partial = state.spec;
  if (!has_error(result.diagnostics)) result.spec = std::move(state.spec);
  return result;
}

namespace {

// How a function is named in a scope conflict: overloads by their parameter types, since their
// qualified names are the same.
std::string claim_name(const function_facts& facts) {
  if (!facts.is_overloaded) return facts.qualified_name;
  std::string out = facts.qualified_name + "(";
  for (std::size_t i = 0; i < facts.parameters.size(); ++i) out += (i ? ", " : "") + facts.parameters[i].type;
  return out + ")";
}

}  // namespace

// The rule "scope-conflicts". The rule itself is the runtime's (idem::detail::scope_conflicts), so
// that a conflict within one header and one across headers are judged alike; here it only gets
// positions.
std::vector<diagnostic> check_scope_conflicts(const std::vector<function_spec>& specs) {
  std::vector<std::string> names;
  names.reserve(specs.size());
  for (const function_spec& spec : specs) names.push_back(claim_name(spec.facts));
  std::vector<detail::scope_claim> claims;
  claims.reserve(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const function_spec& spec = specs[i];
    claims.push_back(detail::scope_claim{.function = names[i],
                                         .scope = spec.scope,
                                         .scope_explicit = !spec.scope_is_default,
                                         .options = spec.options,
                                         .codec = spec.codec,
                                         .result_type = spec.facts.return_type,
                                         .http_endpoint = spec.facts.http_endpoint,
                                         .where = {}});  // the caret and the note show where
  }
  std::vector<diagnostic> out;
  for (const detail::scope_conflict& conflict : detail::scope_conflicts(claims)) {
    const function_spec& earlier = specs[conflict.earlier];
    out.push_back(error_at(specs[conflict.later].scope_position, conflict.message));
    out.push_back(note_at(earlier.scope_position,
                          "'" + names[conflict.earlier] + "' uses scope \"" + earlier.scope + "\" here"));
  }
  return out;
}

}  // namespace idem::annotate
