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
  return "::std::chrono::milliseconds{" + std::to_string(value.count()) + "}";
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

  // Writes `prefix` + `code` as one line that the compiler places at `where` in the annotated
  // source (the prefix padded so that `code` starts at its column), then hands numbering back: a
  // compile error in user-written code then points at the attribute, not at generated code.
  void line_at(const source_position& where, std::string prefix, const std::string& code) {
    if (where.column > prefix.size() + 1) prefix += std::string(where.column - 1 - prefix.size(), ' ');
    line("#line " + std::to_string(where.line) + " " + quote(where.file));
    line(prefix + code);
    restore_numbering();
  }

  const std::string& text() const { return text_; }

 private:
  std::string file_;
  std::string text_;
  unsigned line_ = 0;  // lines written so far
};

void emit_options_function(writer& w, const function_spec& spec) {
  const call_options& o = spec.options;
  if (!o.ttl && !o.lease && !o.wait && !o.completion) {
    w.line("  static ::idem::call_options options() { return {}; }");
    return;
  }
  w.line("  static ::idem::call_options options() {");
  w.line("    ::idem::call_options options;");
  if (o.ttl) w.line("    options.ttl = " + duration_expression(*o.ttl) + ";");
  if (o.lease) w.line("    options.lease = " + duration_expression(*o.lease) + ";");
  if (o.wait) w.line("    options.wait = " + duration_expression(*o.wait) + ";");
  if (o.completion)
    w.line(std::string("    options.completion = ::idem::completion_mode::") +
           (*o.completion == completion_mode::autonomous ? "autonomous" : "join_transaction") + ";");
  w.line("    return options;");
  w.line("  }");
}

// The names of the generated helpers of every function in `<namespace>::idem_generated`: the
// classes between the namespace and the function, the function's name, and its index when the
// name is overloaded or would otherwise repeat (two nested classes `A::Handler`, `B::Handler`
// give A_Handler_on and B_Handler_on; `A_B::C` and `A::B_C` are told apart by the index).
std::vector<std::string> helper_names(const std::vector<function_spec>& specs) {
  std::vector<std::string> names;
  std::map<std::string, unsigned> count;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const function_facts& facts = specs[i].facts;
    const std::string& path = facts.class_path.empty() ? facts.simple_class : facts.class_path;
    std::string name = path.empty() ? facts.name : path + "_" + facts.name;
    if (facts.is_overloaded) name += "_" + std::to_string(i);
    names.push_back(name);
    ++count[facts.namespace_name + "::" + name];
  }
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (count[specs[i].facts.namespace_name + "::" + names[i]] > 1 && !specs[i].facts.is_overloaded)
      names[i] += "_" + std::to_string(i);
  return names;
}

std::string helper_namespace(const function_facts& facts) {
  return "::" + (facts.namespace_name.empty() ? std::string() : facts.namespace_name + "::") + "idem_generated::";
}

std::string key_parameters(const function_facts& facts, bool maybe_unused) {
  std::string out;
  for (std::size_t i = 0; i < facts.parameters.size(); ++i)
    out += (i ? ", " : "") + std::string(maybe_unused ? "[[maybe_unused]] " : "") +
           facts.parameters[i].spelled_key_type() + " " + parameter_name(facts, i);
  return out;
}

std::string code_class(const function_facts& facts) { return "::" + facts.qualified_class; }

// Whether idem::guarded<C> declares this method, and so needs its default arguments.
// An HTTP endpoint is not: the server calls it through idem::http::route.
bool in_guarded_class(const function_facts& facts) {
  return facts.kind == function_kind::member && !facts.class_is_final && !facts.http_endpoint;
}

bool has_defaults(const function_facts& facts) {
  return std::any_of(facts.parameters.begin(), facts.parameters.end(),
                     [](const parameter& p) { return !p.default_argument.empty(); });
}

// The key expression and the codec name, compiled in the namespace of the annotated function
// (where the attribute was written), exactly as idem-annotate checked them.
void emit_helpers(writer& w, const function_spec& spec, const std::string& name) {
  const function_facts& facts = spec.facts;
  w.line(facts.namespace_open + "namespace idem_generated {");
  w.line();
  w.line("// The key of " + location_comment(spec) + ".");
  w.line("inline ::std::string " + name + "_key(" + key_parameters(facts, true) + ") {");
  // The key expression keeps the attribute's line and column, so that a compile error in it
  // (say, after the parameter's type changed) still points at the attribute.
  w.line_at(spec.key_position, "  return ::idem::to_key(", spec.key + ");");
  w.line("}");
  if (!spec.codec.empty()) {
    w.line();
    w.line("using " + name + "_codec =");
    w.line_at(spec.codec_position, "", spec.codec + ";");
  }
  if (in_guarded_class(facts) && has_defaults(facts)) {
    // The default arguments, evaluated where the class's own are: in its namespace, with its
    // members in scope (a class derived from it sees them; it is never instantiated).
    w.line();
    w.line("struct " + name + "_defaults : " + code_class(facts) + " {");
    for (std::size_t i = 0; i < facts.parameters.size(); ++i) {
      const parameter& p = facts.parameters[i];
      if (p.default_argument.empty()) continue;
      w.line("  static " + p.default_type + " argument_" + std::to_string(i) + "() {");
      w.line_at(p.default_position, "    return ", p.default_argument + ";");
      w.line("  }");
    }
    w.line("};");
  }
  w.line();
  w.line("}  " + facts.namespace_close + "// namespace " +
         (facts.namespace_name.empty() ? std::string() : facts.namespace_name + "::") + "idem_generated");
  w.line();
}

void emit_key_function(writer& w, const function_spec& spec, const std::string& name) {
  const function_facts& facts = spec.facts;
  w.line("  static ::std::string key(" + key_parameters(facts, false) + ") {");
  w.line("    return " + helper_namespace(facts) + name + "_key(" + argument_list(facts) + ");");
  w.line("  }");
  if (in_guarded_class(facts))
    for (std::size_t i = 0; i < facts.parameters.size(); ++i) {
      const parameter& p = facts.parameters[i];
      if (p.default_argument.empty()) continue;
      w.line("  // The default argument of '" + parameter_name(facts, i) + "', for idem::guarded<" + facts.simple_class +
             ">.");
      w.line("  static " + p.default_type + " default_argument_" + std::to_string(i) + "() {");
      w.line("    return " + helper_namespace(facts) + name + "_defaults::argument_" + std::to_string(i) + "();");
      w.line("  }");
    }
}

void emit_policy(writer& w, const function_spec& spec, const std::string& name) {
  const function_facts& facts = spec.facts;
  w.line("// " + location_comment(spec));
  w.line("template <>");
  w.line("struct policy<" + function_pointer_expression(facts) + "> {");
  w.line("  static constexpr ::std::string_view function = " + quote(facts.qualified_name) + ";");
  w.line("  static constexpr ::std::string_view scope = " + quote(spec.scope) + ";");
  w.line("  static constexpr ::std::string_view file = " + quote(spec.position.file) + ";");
  w.line("  static constexpr unsigned line = " + std::to_string(spec.position.line) + ";");
  w.line("  static constexpr unsigned column = " + std::to_string(spec.position.column) + ";");
  w.line("  static constexpr bool http_endpoint = " + std::string(facts.http_endpoint ? "true" : "false") + ";");
  if (spec.transaction)
    w.line("  static constexpr ::idem::transaction_demand transaction = ::idem::transaction_demand::" +
           std::string(to_string(*spec.transaction)) + ";");
  if (!spec.codec.empty())
    w.line("  using codec = " + helper_namespace(facts) + name + "_codec;  // " + spec.codec);
  w.line("  static const bool registered;  // defined in the generated .cpp");
  w.line();
  emit_options_function(w, spec);
  if (!facts.http_endpoint) {  // an endpoint's key is the Idempotency-Key header
    w.line();
    emit_key_function(w, spec, name);
  }
  w.line("};");
  w.line();
}

// The body of guarded<C>'s override of a coroutine (boost::asio::awaitable<T>): the context, key
// included, is computed now, before anything suspends (a reference parameter may not live past the
// first suspension); the call of C's coroutine is deferred into the action, which owns the
// by-value parameters and refers to the others, as a call of C's coroutine would.
void emit_async_body(writer& w, const function_facts& facts, const std::string& c) {
  const std::string pointer = function_pointer_expression(facts);
  const std::string arguments = argument_list(facts);
  w.line("    ::idem::context idem_ctx = ::idem::guarded_context<" + pointer + ">(idem_engine_" +
         (arguments.empty() ? "" : ", " + arguments) + ");");
  std::string captures = "this";
  std::string forwarded;
  for (std::size_t i = 0; i < facts.parameters.size(); ++i) {
    const std::string name = parameter_name(facts, i);
    const bool by_reference = facts.parameters[i].type.ends_with('&');
    captures += by_reference ? ", &" + name : ", " + name + " = ::std::move(" + name + ")";
    forwarded += (i ? ", " : "") + (by_reference ? "::std::forward<decltype(" + name + ")>(" + name + ")"
                                                 : "::std::move(" + name + ")");
  }
  w.line("    return ::idem::run_guarded_async<" + pointer + ">(");
  w.line("        idem_engine_, idem_transactions_, ::std::move(idem_ctx), [" + captures + "]() mutable -> " +
         spelled_return_type(facts) +
         " { return this->" + c + "::" + facts.name + "(" + forwarded + "); });");
  w.line("  }");
}

// The two constructors of idem::guarded<C>: without and with a transaction_source.
void emit_guarded_constructors(writer& w, const guarded_class& cls) {
  const std::string& c = cls.code_name;
  std::string pointers;
  for (const guarded_method& method : cls.methods)
    pointers += (pointers.empty() ? "" : ", ") + function_pointer_expression(method.facts);
  w.line("  // Whether a method runs in a transaction that this wrapper begins (transaction = \"required\").");
  w.line("  static constexpr bool idem_needs_transactions = ::idem::needs_transaction_source<" + pointers + ">;");
  w.line();
  w.line("  // Constructs " + cls.name + " from `args` and guards its annotated methods with `idem_engine`,");
  w.line("  // which must outlive this object.");
  w.line("  template <class... Args>");
  w.line("    requires ::std::constructible_from<" + c + ", Args...>");
  w.line("  explicit guarded(::idem::engine& idem_engine, Args&&... args)");
  w.line("      : " + c + "(::std::forward<Args>(args)...), idem_engine_(idem_engine) {");
  w.line("    ::idem::check_without_transaction_source<idem_needs_transactions, Args...>();");
  w.line("  }");
  w.line();
  w.line("  // Constructs " + cls.name + " from `args`; `idem_transactions` begins the transactions of the methods");
  w.line("  // annotated with transaction = \"required\". Both must outlive this object.");
  w.line("  template <class... Args>");
  w.line("    requires idem_needs_transactions && ::std::constructible_from<" + c + ", Args...>");
  w.line("  explicit guarded(::idem::engine& idem_engine, ::idem::transaction_source& idem_transactions, Args&&... args)");
  w.line("      : " + c + "(::std::forward<Args>(args)...), idem_engine_(idem_engine), "
         "idem_transactions_(&idem_transactions) {}");
}

// The override's (or hiding function's) declaration, up to the opening brace.
std::string guarded_signature(const function_facts& facts) {
  const std::string policy = "::idem::policy<" + function_pointer_expression(facts) + ">";
  std::string signature = "  " + spelled_return_type(facts) + " " + facts.name + "(";
  for (std::size_t i = 0; i < facts.parameters.size(); ++i) {
    const parameter& p = facts.parameters[i];
    signature += (i ? ", " : "") + p.spelled_type() + " " + parameter_name(facts, i);
    if (!p.default_argument.empty()) signature += " = " + policy + "::default_argument_" + std::to_string(i) + "()";
  }
  signature += ")";
  if (facts.is_const) signature += " const";
  if (facts.ref_qualifier == "&") signature += " &";
  if (facts.is_noexcept) signature += " noexcept";
  if (facts.is_virtual) signature += " override";
  return signature;
}

// The body of a blocking method's wrapper: idem::run_guarded, then the closing brace.
void emit_blocking_body(writer& w, const function_facts& facts, const std::string& c) {
  std::string forwarded;
  for (std::size_t i = 0; i < facts.parameters.size(); ++i) {
    const std::string name = parameter_name(facts, i);
    forwarded += (i ? ", " : "") + std::string("::std::forward<decltype(") + name + ")>(" + name + ")";
  }
  // The class's own (or inherited) function by its qualified name: an unqualified call would
  // dispatch back into this override.
  const std::string& result = spelled_return_type(facts);
  const std::string base_call = "this->" + c + "::" + facts.name + "(" + forwarded + ")";
  const std::string action = facts.returns_void ? "[&]() -> void { " + base_call + "; }"
                                                 : "[&]() -> " + result + " { return " + base_call + "; }";
  const std::string arguments = argument_list(facts);
  w.line(std::string("    ") + (facts.returns_void ? "" : "return ") + "::idem::run_guarded<" +
         function_pointer_expression(facts) + ">(");
  w.line("        idem_engine_, idem_transactions_, " + action + (arguments.empty() ? "" : ", " + arguments) + ");");
  w.line("  }");
}

void emit_guarded_method(writer& w, const guarded_method& method, const std::string& c) {
  const function_facts& facts = method.facts;
  w.line();
  w.line("  // " + facts.qualified_name + ", " + file_name(method.position.file) + ":" +
         std::to_string(method.position.line) + ":" + std::to_string(method.position.column) +
         (method.inherited ? " (inherited)" : ""));
  w.line(guarded_signature(facts) + " {");
  if (facts.is_async)
    emit_async_body(w, facts, c);
  else
    emit_blocking_body(w, facts, c);
}

void emit_guarded(writer& w, const guarded_class& cls) {
  const std::string& c = cls.code_name;
  w.line("// Every annotated method of " + cls.name + " routed through the engine; see <idem/invoke.hpp>.");
  w.line("template <>");
  w.line("class guarded<" + c + "> : public " + c + " {");
  w.line(" public:");
  emit_guarded_constructors(w, cls);
  // Every overload of an annotated name stays callable as on the class: the guarded declarations
  // below hide only the overloads they guard.
  std::vector<std::string> names;
  for (const guarded_method& method : cls.methods)
    if (std::find(names.begin(), names.end(), method.facts.name) == names.end()) names.push_back(method.facts.name);
  w.line();
  for (const std::string& name : names) w.line("  using " + c + "::" + name + ";");
  for (const guarded_method& method : cls.methods) emit_guarded_method(w, method, c);
  w.line();
  w.line(" private:");
  w.line("  ::idem::engine& idem_engine_;");
  w.line("  ::idem::transaction_source* idem_transactions_ = nullptr;");
  w.line("};");
  w.line();
}

std::string optional_duration(const std::optional<std::chrono::milliseconds>& value) {
  return value ? format_duration(*value) : std::string();
}

}  // namespace

std::vector<guarded_class> guarded_classes(const std::vector<function_spec>& specs) {
  std::vector<guarded_class> classes;
  for (const function_spec& spec : specs) {
    if (!in_guarded_class(spec.facts)) continue;
    auto it = std::find_if(classes.begin(), classes.end(),
                           [&](const guarded_class& c) { return c.name == spec.facts.qualified_class; });
    if (it == classes.end()) {
      classes.push_back({spec.facts.qualified_class, code_class(spec.facts), {}, {}});
      it = classes.end() - 1;
    }
    it->methods.push_back({spec.facts, spec.position, false});
  }
  return classes;
}

std::string function_pointer_expression(const function_facts& facts) {
  const std::string name = "&::" + facts.qualified_name;
  if (!facts.is_overloaded || facts.pointer_type.empty()) return name;
  return "static_cast<" + facts.pointer_type + ">(" + name + ")";
}

generated_files emit(const std::vector<function_spec>& specs, const emit_options& options) {
  return emit(specs, guarded_classes(specs), options);
}

generated_files emit(const std::vector<function_spec>& specs, const std::vector<guarded_class>& classes,
                     const emit_options& options) {
  generated_files files;
  const std::string source_name = file_name(options.source_path);
  const std::vector<std::string> names = helper_names(specs);

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
  if (std::any_of(specs.begin(), specs.end(),
                  [](const function_spec& spec) { return spec.facts.is_async && !spec.facts.http_endpoint; }))
    h.line("#include <idem/asio.hpp>  // coroutines: idem::run_guarded_async, idem::invoke's asynchronous form");
  h.line();
  // idem_generate passes -Wno-attributes=idem:: to GCC, which GCC 12 forgets in a file compiled
  // with a precompiled header and -g: the annotated header would warn about its own attributes.
  h.line("#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12");
  h.line("#pragma GCC diagnostic ignored_attributes \"idem::\"");
  h.line("#endif");
  h.line("#include " + quote(options.include_as));
  h.line();
  std::vector<std::pair<std::string, std::string>> includes;
  for (const guarded_class& cls : classes)
    for (const auto& include : cls.includes)
      if (std::find(includes.begin(), includes.end(), include) == includes.end()) includes.push_back(include);
  for (const auto& [generated, header] : includes) {
    // The policies of inherited methods annotated in another header.
    h.line("#if __has_include(" + quote(generated) + ")");
    h.line("#include " + quote(generated));
    h.line("#else");
    h.line("#error " + quote("idem: a class of " + source_name + " inherits methods annotated in " + header +
                             "; generate that header too (idem_generate(<target> HEADERS ... " + header + "))"));
    h.line("#endif");
    h.line();
  }
  // An endpoint has no key expression, no codec and no guarded<C> wrapper: no helpers.
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (!specs[i].facts.http_endpoint) emit_helpers(h, specs[i], names[i]);
  h.line("namespace idem {");
  h.line();
  for (std::size_t i = 0; i < specs.size(); ++i) emit_policy(h, specs[i], names[i]);
  for (const guarded_class& cls : classes) emit_guarded(h, cls);
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
    s.line("const bool " + p + "::registered = ::idem::register_policy(::idem::policy_info{");
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
    entry["transaction"] = std::string(to_string(spec.transaction.value_or(transaction_demand::caller)));
    entry["http_endpoint"] = facts.http_endpoint;
    entry["async"] = facts.is_async;
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
