// annotator/src/validator_rules.hpp — the validator's rules, each a named unit (validator.cpp runs them).
//
// A rule checks one thing and says so in its name (kebab-case, as docs/annotator.md's table of
// build-time rules lists it: "duration-syntax", "key-required"). Three tables, run in this order:
//   function_rules()  the function the attribute stands before (function_rules.cpp): the first that
//                     reports ends the validation, since nothing else about it matters then;
//   name_rules()      each argument's name, argument by argument (argument_rules.cpp): the first that
//                     reports sets the argument aside;
//   setting_rules()   what the arguments set, in a fixed order (argument_rules.cpp): every one runs,
//                     and each fills the part of the spec it validates.
// The order of the tables' entries is the order of the diagnostics.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model.hpp"

namespace idem::annotate {

// What one attribute's rules read, and what they write: the spec and the diagnostics.
struct validation_state {
  validation_state(const raw_attribute& written, const function_facts& about, std::vector<diagnostic>& diagnostics);

  const raw_attribute& attribute;
  const function_facts& facts;
  std::string attribute_name;  // as written, for messages: "idem::idempotent"
  // Every argument whose name passed the name rules, by name.
  std::map<std::string, const raw_argument*, std::less<>> given;
  function_spec spec;
  std::vector<diagnostic>& out;

  // The argument `name`, or null when it is not given (or was set aside).
  const raw_argument* find(std::string_view name) const;
  void error(source_position where, std::string message);
  void note(source_position where, std::string message);
};

// Returns true when it reported an error.
struct function_rule {
  std::string_view name;
  bool (*check)(validation_state& state);
};

// Returns true when it reported an error about `argument`.
struct name_rule {
  std::string_view name;
  bool (*check)(validation_state& state, const raw_argument& argument);
};

struct setting_rule {
  std::string_view name;
  void (*check)(validation_state& state);
};

std::span<const function_rule> function_rules();
std::span<const name_rule> name_rules();
std::span<const setting_rule> setting_rules();

// How messages name the function: "'shop::OrderListener::on'".
std::string display_name(const function_facts& facts);

// The first character of a value, inside its opening quote.
source_position value_start(const raw_argument& argument);

}  // namespace idem::annotate
