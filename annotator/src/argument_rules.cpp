// annotator/src/argument_rules.cpp — the rules about an attribute's arguments: their names, then
// what they set, with the runtime's own parsers and bounds. See validator_rules.hpp.
#include "validator_rules.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include <idem/context.hpp>
#include <idem/duration.hpp>
#include <idem/identity.hpp>
#include <idem/transaction.hpp>

#include "validator.hpp"

namespace idem::annotate {

namespace {

// Whether an argument's value holds nothing but white space: a key or codec of only spaces,
// tabs or line breaks is none. The one test of blankness for every argument.
bool is_blank(std::string_view value) { return value.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos; }

// ---------------------------------------------------------------------------------------------
// Names: known and given once.

bool argument_unknown(validation_state& s, const raw_argument& argument) {
  const auto& names = argument_names();
  if (std::find(names.begin(), names.end(), argument.name) != names.end()) return false;
  const std::string suggestion = suggest_argument(argument.name);
  const std::string unknown = "unknown argument '" + argument.name + "' in " + s.attribute_name;
  if (!suggestion.empty())
    s.error(argument.name_position, unknown + "; did you mean '" + suggestion + "'?");
  else
    s.error(argument.name_position,
            unknown + "; expected key, scope, ttl, lease, waitTimeout, completion, transaction or codec");
  return true;
}

bool argument_duplicate(validation_state& s, const raw_argument& argument) {
  const raw_argument* first = s.find(argument.name);
  if (first == nullptr) return false;
  s.error(argument.name_position, "duplicate argument '" + argument.name + "' in " + s.attribute_name);
  s.note(first->name_position, "'" + argument.name + "' first given here");
  return true;
}

constexpr name_rule name_table[] = {
    {"argument-unknown", argument_unknown},
    {"argument-duplicate", argument_duplicate},
};

// ---------------------------------------------------------------------------------------------
// HTTP endpoints take key, codec, completion and transaction from their server's adapter.

void http_endpoint_arguments(validation_state& s) {
  if (!s.facts.http_endpoint) return;
  static constexpr std::pair<std::string_view, std::string_view> refused[] = {
      {"key", "its key comes from the Idempotency-Key header"},
      {"codec", "the HTTP adapter stores and replays the response itself"},
      {"completion", "an HTTP endpoint always completes autonomously"},
      {"transaction", "its server's adapter calls it, and opens no transaction; begin one in the handler"},
  };
  for (const auto& [name, why] : refused)
    if (const raw_argument* argument = s.find(name))
      s.error(argument->name_position,
              "'" + std::string(name) + "' is not allowed on an HTTP endpoint: " + std::string(why));
}

// ---------------------------------------------------------------------------------------------
// key: required on functions, an expression over the parameters (type-checked by Sema later).

void key_required(validation_state& s) {
  if (s.facts.http_endpoint) return;
  const raw_argument* key = s.find("key");
  if (key != nullptr && !is_blank(key->value)) {
    s.spec.key = key->value;
    s.spec.key_position = value_start(*key);
    s.spec.key_characters = key->value_characters;
    return;
  }
  const std::string example = s.facts.parameters.empty() || s.facts.parameters.front().name.empty()
                                  ? std::string("key = \"<expression over the parameters>\"")
                                  : "key = \"" + s.facts.parameters.front().name + ".id\"";
  s.error(key == nullptr ? s.attribute.position : value_start(*key),
          s.attribute_name + " on " + display_name(s.facts) +
              " needs a key: an expression over its parameters that names the attempt, for example " + example);
}

// ---------------------------------------------------------------------------------------------
// scope: explicit or default; the runtime's rule either way. An empty scope means the default, as
// in the original library, and does not count as naming one.

const raw_argument* explicit_scope(const validation_state& s) {
  const raw_argument* scope = s.find("scope");
  return scope != nullptr && !scope->value.empty() ? scope : nullptr;
}

void scope_valid(validation_state& s) {
  const raw_argument* scope = explicit_scope(s);
  if (scope == nullptr) return;
  s.spec.scope = scope->value;
  s.spec.scope_is_default = false;
  s.spec.scope_position = value_start(*scope);
  if (std::string problem = scope_problem(scope->value); !problem.empty())
    s.error(value_start(*scope), "invalid scope \"" + scope->value + "\": " + problem);
}

void default_scope_valid(validation_state& s) {
  if (explicit_scope(s) != nullptr) return;
  const raw_argument* empty_scope = s.find("scope");
  s.spec.scope = default_scope(s.facts);
  s.spec.scope_position = empty_scope != nullptr ? empty_scope->value_position : s.attribute.position;
  if (std::string problem = scope_problem(s.spec.scope); !problem.empty())
    s.error(s.attribute.position, "the default scope \"" + s.spec.scope + "\" of " + display_name(s.facts) +
                                      " is invalid: " + problem + "; set scope = \"...\"");
}

// ---------------------------------------------------------------------------------------------
// Durations: one parser for the generator and the runtime, and the runtime's lower bounds. An
// empty one means "engine default". The grammar has no sign, so every parsed wait is >= 0
// (PT0S = look once, never block).

struct duration_setting {
  std::string_view name;
  duration_field field;
  std::optional<std::chrono::milliseconds> call_options::*slot;
};

constexpr duration_setting ttl_setting{"ttl", duration_field::ttl, &call_options::ttl};
constexpr duration_setting lease_setting{"lease", duration_field::lease, &call_options::lease};
constexpr duration_setting wait_setting{"waitTimeout", duration_field::wait, &call_options::wait};

// Parses the duration into the spec's options.
template <const duration_setting& setting>
void duration_syntax(validation_state& s) {
  const raw_argument* argument = s.find(setting.name);
  if (argument == nullptr || argument->value.empty()) return;
  const duration_parse_result parsed = parse_duration(argument->value);
  if (parsed.ok()) {
    s.spec.options.*setting.slot = parsed.value;
    return;
  }
  s.error(argument->character(parsed.position), "invalid " + std::string(setting.name) + " \"" + argument->value +
                                                    "\": " + std::string(parsed.message));
}

// Checks the parsed duration against the runtime's bound (duration_problem).
template <const duration_setting& setting>
void duration_minimum(validation_state& s) {
  std::optional<std::chrono::milliseconds>& parsed = s.spec.options.*setting.slot;
  if (!parsed) return;
  const std::string_view problem = duration_problem(setting.field, *parsed);
  if (problem.empty()) return;
  parsed.reset();
  const raw_argument& argument = *s.find(setting.name);
  s.error(value_start(argument), std::string(setting.name) + " \"" + argument.value + "\" is too short: " +
                                     std::string(problem));
}

// ---------------------------------------------------------------------------------------------
// transaction and completion: the runtime's parsers.

void transaction_demand(validation_state& s) {
  const raw_argument* transaction = s.find("transaction");
  if (transaction == nullptr || transaction->value.empty() || s.facts.http_endpoint) return;
  if (auto demand = parse_transaction_demand(transaction->value))
    s.spec.transaction = *demand;
  else
    s.error(value_start(*transaction),
            "unknown transaction \"" + transaction->value + "\"; expected \"caller\" or \"required\"");
}

void completion_mode(validation_state& s) {
  const raw_argument* completion = s.find("completion");
  if (completion == nullptr || completion->value.empty()) return;
  if (auto mode = parse_completion_mode(completion->value))
    s.spec.options.completion = *mode;
  else
    s.error(value_start(*completion), "unknown completion mode \"" + completion->value +
                                          "\"; expected \"autonomous\" or \"join-transaction\"");
}

// A transaction bound to a thread does not survive a co_await.
void completion_join_coroutine(validation_state& s) {
  if (s.spec.options.completion != completion_mode::join_transaction || !s.facts.is_async ||
      s.facts.http_endpoint || s.spec.transaction == transaction_demand::required)
    return;
  s.error(value_start(*s.find("completion")),
          "completion \"join-transaction\" on a coroutine needs transaction = \"required\": a "
          "transaction bound to a thread does not survive a co_await, so a coroutine can join "
          "only the transaction its wrapper begins and carries; or use \"autonomous\"");
}

// ---------------------------------------------------------------------------------------------
// codec: required exactly when there is a value to replay (the type itself is checked by Sema).
// An empty codec is none; one of only spaces names nothing either, but is not empty, so a void
// function refuses it like any codec, and a value-returning one is told at the value to name one.

void codec_for_void(validation_state& s) {
  const raw_argument* codec = s.find("codec");
  if (s.facts.http_endpoint || !s.facts.returns_void || codec == nullptr || codec->value.empty()) return;
  s.error(value_start(*codec), "codec \"" + codec->value + "\" is pointless: " + display_name(s.facts) +
                                   (s.facts.is_async ? " produces no value" : " returns void") +
                                   " and has nothing to replay");
}

void codec_for_value(validation_state& s) {
  if (s.facts.http_endpoint || s.facts.returns_void) return;
  const raw_argument* codec = s.find("codec");
  if (codec != nullptr && !is_blank(codec->value)) {
    s.spec.codec = codec->value;
    s.spec.codec_position = value_start(*codec);
    s.spec.codec_characters = codec->value_characters;
    return;
  }
  s.error(codec ? value_start(*codec) : s.attribute.position,
          display_name(s.facts) + (s.facts.is_async ? " produces '" : " returns '") + replayed_type(s.facts) +
              "', so a duplicate call must be given that value back: name a codec that encodes it, "
              "for example codec = \"idem::json_codec\"");
}

constexpr setting_rule setting_table[] = {
    {"http-endpoint-arguments", http_endpoint_arguments},
    {"key-required", key_required},
    {"scope-valid", scope_valid},
    {"default-scope-valid", default_scope_valid},
    {"duration-syntax", duration_syntax<ttl_setting>},
    {"duration-minimum", duration_minimum<ttl_setting>},
    {"duration-syntax", duration_syntax<lease_setting>},
    {"duration-minimum", duration_minimum<lease_setting>},
    {"duration-syntax", duration_syntax<wait_setting>},
    {"duration-minimum", duration_minimum<wait_setting>},
    {"transaction-demand", transaction_demand},
    {"completion-mode", completion_mode},
    {"completion-join-coroutine", completion_join_coroutine},
    {"codec-for-void", codec_for_void},
    {"codec-for-value", codec_for_value},
};

}  // namespace

std::span<const name_rule> name_rules() { return name_table; }

std::span<const setting_rule> setting_rules() { return setting_table; }

}  // namespace idem::annotate
