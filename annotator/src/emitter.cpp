// annotator/src/emitter.cpp — see emitter.hpp.
#include "emitter.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include <idem/duration.hpp>

namespace idem::annotate {

namespace {

// A C++ string literal for `text`.
std::string quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\%03o", static_cast<unsigned char>(c));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string file_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string duration_expression(std::chrono::milliseconds value) {
  return "std::chrono::milliseconds{" + std::to_string(value.count()) + "}";
}

std::string location_comment(const function_spec& spec) {
  return spec.facts.qualified_name + ", " + file_name(spec.position.file) + ":" + std::to_string(spec.position.line) +
         ":" + std::to_string(spec.position.column);
}

std::string parameter_name(const function_facts& facts, std::size_t index) {
  const std::string& name = facts.parameters[index].name;
  return name.empty() ? "idem_unnamed_" + std::to_string(index) : name;
}

std::string argument_list(const function_facts& facts) {
  std::string out;
  for (std::size_t i = 0; i < facts.parameters.size(); ++i) out += (i ? ", " : "") + parameter_name(facts, i);
  return out;
}

// A writer that knows which line it is on, so that `#line` can hand numbering back.
class writer {
 public:
  explicit writer(std::string file) : file_(std::move(file)) {}

  writer& line(const std::string& text = {}) {
    text_ += text;
    text_ += '\n';
    ++line_;
    return *this;
  }
  // Restores the generated file's own numbering after a `#line` into the annotated source.
  void restore_numbering() { line("#line " + std::to_string(line_ + 2) + " " + quote(file_)); }

  const std::string& text() const { return text_; }

 private:
  std::string file_;
  std::string text_;
  unsigned line_ = 0;  // lines written so far
};

void emit_options_function(writer& w, const function_spec& spec) {
  const call_options& o = spec.options;
  if (!o.ttl && !o.lease && !o.wait && !o.completion) {
    w.line("  static call_options options() { return {}; }");
    return;
  }
  w.line("  static call_options options() {");
  w.line("    call_options options;");
  if (o.ttl) w.line("    options.ttl = " + duration_expression(*o.ttl) + ";");
  if (o.lease) w.line("    options.lease = " + duration_expression(*o.lease) + ";");
  if (o.wait) w.line("    options.wait = " + duration_expression(*o.wait) + ";");
  if (o.completion)
    w.line(std::string("    options.completion = completion_mode::") +
           (*o.completion == completion_mode::autonomous ? "autonomous" : "join_transaction") + ";");
  w.line("    return options;");
  w.line("  }");
}

// The name of the generated helpers of one function in `<namespace>::idem_generated`.
std::string helper_name(const function_spec& spec, std::size_t index) {
  const function_facts& facts = spec.facts;
  std::string name = facts.simple_class.empty() ? facts.name : facts.simple_class + "_" + facts.name;
  if (facts.is_overloaded) name += "_" + std::to_string(index);
  return name;
}

std::string helper_namespace(const function_facts& facts) {
  return "::" + (facts.namespace_name.empty() ? std::string() : facts.namespace_name + "::") + "idem_generated::";
}

std::string key_parameters(const function_facts& facts, bool maybe_unused) {
  std::string out;
  for (std::size_t i = 0; i < facts.parameters.size(); ++i)
    out += (i ? ", " : "") + std::string(maybe_unused ? "[[maybe_unused]] " : "") + facts.parameters[i].key_type + " " +
           parameter_name(facts, i);
  return out;
}

// The key expression and the codec name, compiled in the namespace of the annotated function
// (where the attribute was written), exactly as idem-annotate checked them.
void emit_helpers(writer& w, const function_spec& spec, std::size_t index) {
  const function_facts& facts = spec.facts;
  const std::string name = helper_name(spec, index);
  w.line(facts.namespace_open + "namespace idem_generated {");
  w.line();
  w.line("// The key of " + location_comment(spec) + ".");
  w.line("inline std::string " + name + "_key(" + key_parameters(facts, true) + ") {");
  // The key expression keeps the attribute's line and column, so that a compile error in it
  // (say, after the parameter's type changed) still points at the attribute.
  std::string prefix = "  return ::idem::to_key(";
  const unsigned column = spec.key_position.column;
  if (column > prefix.size() + 1) prefix += std::string(column - 1 - prefix.size(), ' ');
  w.line("#line " + std::to_string(spec.key_position.line) + " " + quote(spec.key_position.file));
  w.line(prefix + spec.key + ");");
  w.restore_numbering();
  w.line("}");
  if (!spec.codec.empty()) {
    w.line();
    w.line("using " + name + "_codec =");
    w.line("#line " + std::to_string(spec.codec_position.line) + " " + quote(spec.codec_position.file));
    w.line(std::string(spec.codec_position.column > 1 ? spec.codec_position.column - 1 : 0, ' ') + spec.codec + ";");
    w.restore_numbering();
  }
  w.line();
  w.line("}  " + facts.namespace_close + "// namespace " +
         (facts.namespace_name.empty() ? std::string() : facts.namespace_name + "::") + "idem_generated");
  w.line();
}

void emit_key_function(writer& w, const function_spec& spec, std::size_t index) {
  const function_facts& facts = spec.facts;
  w.line("  static std::string key(" + key_parameters(facts, false) + ") {");
  w.line("    return " + helper_namespace(facts) + helper_name(spec, index) + "_key(" + argument_list(facts) + ");");
  w.line("  }");
}

void emit_policy(writer& w, const function_spec& spec, std::size_t index) {
  const function_facts& facts = spec.facts;
  w.line("// " + location_comment(spec));
  w.line("template <>");
  w.line("struct policy<" + function_pointer_expression(facts) + "> {");
  w.line("  static constexpr std::string_view function = " + quote(facts.qualified_name) + ";");
  w.line("  static constexpr std::string_view scope = " + quote(spec.scope) + ";");
  w.line("  static constexpr std::string_view file = " + quote(spec.position.file) + ";");
  w.line("  static constexpr unsigned line = " + std::to_string(spec.position.line) + ";");
  w.line("  static constexpr unsigned column = " + std::to_string(spec.position.column) + ";");
  w.line("  static constexpr bool http_endpoint = " + std::string(facts.http_endpoint ? "true" : "false") + ";");
  if (!spec.codec.empty())
    w.line("  using codec = " + helper_namespace(facts) + helper_name(spec, index) + "_codec;  // " + spec.codec);
  w.line("  static const bool registered;  // defined in the generated .cpp");
  w.line();
  emit_options_function(w, spec);
  w.line();
  emit_key_function(w, spec, index);
  w.line("};");
  w.line();
}

void emit_guarded(writer& w, const std::string& cls, const std::vector<const function_spec*>& methods) {
  w.line("// Every annotated method of " + cls + " routed through the engine; see <idem/invoke.hpp>.");
  w.line("template <>");
  w.line("class guarded<" + cls + "> : public " + cls + " {");
  w.line(" public:");
  w.line("  // Constructs " + cls + " from `args` and guards its annotated methods with `idem_engine`,");
  w.line("  // which must outlive this object.");
  w.line("  template <class... Args>");
  w.line("    requires std::constructible_from<" + cls + ", Args...>");
  w.line("  explicit guarded(::idem::engine& idem_engine, Args&&... args)");
  w.line("      : " + cls + "(std::forward<Args>(args)...), idem_engine_(idem_engine) {}");
  for (const function_spec* spec : methods) {
    const function_facts& facts = spec->facts;
    w.line();
    w.line("  // " + location_comment(*spec));
    std::string signature = "  " + facts.return_type + " " + facts.name + "(";
    for (std::size_t i = 0; i < facts.parameters.size(); ++i)
      signature += (i ? ", " : "") + facts.parameters[i].type + " " + parameter_name(facts, i);
    signature += ")";
    if (facts.is_const) signature += " const";
    if (facts.ref_qualifier == "&") signature += " &";
    if (facts.is_noexcept) signature += " noexcept";
    if (facts.is_virtual) signature += " override";
    w.line(signature + " {");
    std::string forwarded;
    for (std::size_t i = 0; i < facts.parameters.size(); ++i) {
      const std::string name = parameter_name(facts, i);
      forwarded += (i ? ", " : "") + std::string("std::forward<decltype(") + name + ")>(" + name + ")";
    }
    const std::string base_call = "this->" + cls + "::" + facts.name + "(" + forwarded + ")";
    const std::string action = facts.returns_void ? "[&]() -> void { " + base_call + "; }"
                                                   : "[&]() -> " + facts.return_type + " { return " + base_call + "; }";
    const std::string arguments = argument_list(facts);
    w.line(std::string("    ") + (facts.returns_void ? "" : "return ") + "::idem::detail::run<policy<" +
           function_pointer_expression(facts) + ">, " + facts.return_type + ">(");
    w.line("        idem_engine_, " + action + (arguments.empty() ? "" : ", " + arguments) + ");");
    w.line("  }");
  }
  w.line();
  w.line(" private:");
  w.line("  ::idem::engine& idem_engine_;");
  w.line("};");
  w.line();
}

std::string optional_duration(const std::optional<std::chrono::milliseconds>& value) {
  return value ? format_duration(*value) : std::string();
}

}  // namespace

std::string function_pointer_expression(const function_facts& facts) {
  const std::string name = "&" + facts.qualified_name;
  if (!facts.is_overloaded || facts.pointer_type.empty()) return name;
  return "static_cast<" + facts.pointer_type + ">(" + name + ")";
}

generated_files emit(const std::vector<function_spec>& specs, const emit_options& options) {
  generated_files files;
  const std::string source_name = file_name(options.source_path);

  // The header: policies, then one guarded<C> per class.
  writer h(options.header_name);
  h.line("// " + options.header_name + " — generated by " + options.generator + " from " + source_name + ". Do not edit.");
  h.line("//");
  h.line("// Annotated functions:");
  for (const function_spec& spec : specs)
    h.line("//   " + spec.facts.qualified_name + "  scope \"" + spec.scope + "\"");
  h.line("#pragma once");
  h.line();
  h.line("#include <chrono>");
  h.line("#include <concepts>");
  h.line("#include <string>");
  h.line("#include <string_view>");
  h.line("#include <utility>");
  h.line();
  h.line("#include <idem/invoke.hpp>");
  h.line();
  h.line("#include " + quote(options.include_as));
  h.line();
  for (std::size_t i = 0; i < specs.size(); ++i) emit_helpers(h, specs[i], i);
  h.line("namespace idem {");
  h.line();
  std::vector<std::string> class_order;
  std::map<std::string, std::vector<const function_spec*>> methods_by_class;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const function_spec& spec = specs[i];
    emit_policy(h, spec, i);
    if (spec.facts.kind != function_kind::member) continue;
    auto [it, inserted] = methods_by_class.try_emplace(spec.facts.qualified_class);
    if (inserted) class_order.push_back(spec.facts.qualified_class);
    it->second.push_back(&spec);
  }
  for (const std::string& cls : class_order) emit_guarded(h, cls, methods_by_class[cls]);
  h.line("}  // namespace idem");
  files.header = h.text();

  // The source: one registration per policy, run before main() so that every engine checks them.
  writer s(file_name(options.header_name) + ".cpp");
  s.line("// Generated by " + options.generator + " from " + source_name + ". Do not edit.");
  s.line("//");
  s.line("// Registers every annotated function so that each idem::engine checks it against its store and");
  s.line("// configuration when it is constructed.");
  s.line("#include " + quote(options.header_name));
  s.line();
  s.line("#include <idem/policy_registry.hpp>");
  s.line();
  s.line("namespace idem {");
  for (const function_spec& spec : specs) {
    const std::string p = "policy<" + function_pointer_expression(spec.facts) + ">";
    s.line();
    s.line("const bool " + p + "::registered = detail::register_policy(detail::policy_info{");
    s.line("    .function = " + p + "::function,");
    s.line("    .scope = " + p + "::scope,");
    s.line("    .scope_explicit = " + std::string(spec.scope_is_default ? "false" : "true") + ",");
    s.line("    .options = " + p + "::options(),");
    s.line("    .codec = " + quote(spec.codec) + ",");
    s.line("    .result_type = " + quote(spec.facts.return_type) + ",");
    s.line("    .http_endpoint = " + p + "::http_endpoint,");
    s.line("    .file = " + p + "::file,");
    s.line("    .line = " + p + "::line,");
    s.line("    .column = " + p + "::column,");
    s.line("});");
  }
  s.line();
  s.line("}  // namespace idem");
  files.source = s.text();

  // The manifest: the audit list of what is idempotent, and with which settings.
  nlohmann::ordered_json functions = nlohmann::ordered_json::array();
  for (const function_spec& spec : specs) {
    const function_facts& facts = spec.facts;
    nlohmann::ordered_json entry;
    entry["function"] = facts.qualified_name;
    entry["kind"] = facts.kind == function_kind::free            ? "free"
                    : facts.kind == function_kind::static_member ? "static member"
                    : facts.is_virtual                           ? "virtual member"
                                                                 : "member";
    entry["scope"] = spec.scope;
    entry["scope_explicit"] = !spec.scope_is_default;
    entry["key"] = spec.key;
    entry["returns"] = facts.return_type;
    entry["codec"] = spec.codec;
    entry["ttl"] = optional_duration(spec.options.ttl);
    entry["lease"] = optional_duration(spec.options.lease);
    entry["waitTimeout"] = optional_duration(spec.options.wait);
    entry["completion"] = spec.options.completion ? std::string(to_string(*spec.options.completion)) : std::string();
    entry["http_endpoint"] = facts.http_endpoint;
    entry["location"] = {{"file", spec.position.file}, {"line", spec.position.line}, {"column", spec.position.column}};
    functions.push_back(std::move(entry));
  }
  nlohmann::ordered_json manifest;
  manifest["generator"] = options.generator;
  manifest["source"] = options.source_path;
  manifest["note"] = "empty ttl, lease, waitTimeout or completion = the engine's configured default";
  manifest["functions"] = std::move(functions);
  files.manifest = manifest.dump(2) + "\n";
  return files;
}

}  // namespace idem::annotate
