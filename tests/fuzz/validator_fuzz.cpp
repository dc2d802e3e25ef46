// libFuzzer target for idem-annotate's pure validator (annotator/src/validator.hpp): an attribute
// built from fuzzed argument names and values, before a function whose facts are fuzzed too.
// validate() never crashes; every diagnostic points inside the attribute as written (the file,
// line 1, a column between the attribute's first and last character); a result is a spec exactly
// when no diagnostic is an error, and an accepted spec obeys the runtime's rules.
//
// Input: byte 0 = facts flags; then lines. Line 1 = "<class>.<function>" (no '.' = free
// function); each further line = "<name>=<value>" (one argument; no '=' = a name with an empty
// value).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <idem/context.hpp>
#include <idem/identity.hpp>

#include "validator.hpp"

namespace {

using namespace idem::annotate;

constexpr std::string_view file_name = "fuzz.hpp";

source_position at(unsigned column) { return source_position{std::string(file_name), 1, column}; }

std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t end = text.find('\n');
    out.push_back(text.substr(0, end));
    if (end == std::string_view::npos) return out;
    text.remove_prefix(end + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 4096) return 0;
  const std::uint8_t flags = data[0];
  const std::vector<std::string_view> parts = lines(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));

  function_facts facts;
  const std::string_view names = parts.front();
  if (const std::size_t dot = names.find('.'); dot != std::string_view::npos) {
    facts.kind = (flags & 1) ? function_kind::static_member : function_kind::member;
    facts.simple_class = std::string(names.substr(0, dot));
    facts.qualified_class = "ns::" + facts.simple_class;
    facts.name = std::string(names.substr(dot + 1));
    facts.qualified_name = facts.qualified_class + "::" + facts.name;
  } else {
    facts.name = std::string(names);
    facts.qualified_name = "ns::" + facts.name;
  }
  facts.returns_void = (flags & 2) == 0;
  facts.return_type = facts.returns_void ? "void" : "ns::Receipt";
  facts.http_endpoint = (flags & 4) != 0;
  facts.is_private = (flags & 8) != 0;
  facts.is_virtual = (flags & 16) != 0;
  // One flag in four asks for a function that can never be guarded.
  if ((flags & 0xc0) == 0xc0) {
    switch ((flags >> 3) & 3) {
      case 0: facts.is_special = true; break;
      case 1: facts.is_template = true; break;
      case 2: facts.internal_linkage = true; break;
      default: facts.returns_reference = true; break;
    }
  }
  if (flags & 32) {
    parameter cmd;
    cmd.type = cmd.key_type = "const ns::Cmd&";
    cmd.name = "cmd";
    cmd.position = at(1);
    facts.parameters.push_back(std::move(cmd));
  }

  // The attribute as if written on one line: [[idem::idempotent(name = "value", ...)]]
  raw_attribute attribute;
  attribute.spelling = "idem::idempotent";
  attribute.position = at(9);  // `idempotent`
  unsigned column = 20;        // after `[[idem::idempotent(`
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view part = parts[i];
    const std::size_t equals = part.find('=');
    raw_argument argument;
    argument.name = std::string(part.substr(0, equals));
    argument.name_position = at(column);
    column += static_cast<unsigned>(argument.name.size()) + 3;  // ` = `
    argument.value = equals == std::string_view::npos ? std::string() : std::string(part.substr(equals + 1));
    argument.value_position = at(column);
    for (std::size_t c = 0; c <= argument.value.size(); ++c) argument.value_characters.push_back(at(column + 1 + static_cast<unsigned>(c)));
    column += static_cast<unsigned>(argument.value.size()) + 2 + 2;  // the quotes and `, `
    attribute.arguments.push_back(std::move(argument));
  }
  const unsigned last_column = column + 2;  // `)]]`

  const validation_result result = validate(attribute, facts);

  bool has_error = false;
  for (const diagnostic& d : result.diagnostics) {
    if (d.position.file != file_name || d.position.line != 1 || d.position.column < 1 || d.position.column > last_column)
      std::abort();
    if (d.message.empty()) std::abort();
    has_error = has_error || d.level == severity::error;
  }
  if (result.ok() == has_error) std::abort();
  if (result.ok()) {
    const function_spec& spec = *result.spec;
    if (!idem::scope_problem(spec.scope).empty()) std::abort();
    if (spec.options.ttl && *spec.options.ttl < std::chrono::milliseconds(1)) std::abort();
    if (spec.options.lease && *spec.options.lease < std::chrono::milliseconds(2)) std::abort();
    if (spec.options.wait && spec.options.wait->count() < 0) std::abort();
    if (!facts.http_endpoint && spec.key.find_first_not_of(" \t") == std::string::npos) std::abort();
    if (facts.returns_void != spec.codec.empty() && !facts.http_endpoint) std::abort();
  }
  return 0;
}
