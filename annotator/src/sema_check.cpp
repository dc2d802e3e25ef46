// annotator/src/sema_check.cpp — see sema_check.hpp.
#include "sema_check.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <clang/AST/ASTContext.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Sema/Sema.h>
#include <llvm/Support/MemoryBuffer.h>

#include "declaration_facts.hpp"

namespace idem::annotate {

namespace {

// ---------------------------------------------------------------------------------------------
// The check buffer.

struct check_item {
  std::size_t spec_index = 0;
  const clang::FunctionDecl* function = nullptr;
  std::string key_function;  // names in the check buffer
  std::string key_ok;
  std::string codec_ok;
  int key_region = -1;
  int codec_region = -1;
};

class check_writer {
 public:
  explicit check_writer(check_state& state) : state_(state) {}

  void add(std::string_view s) { text_.append(s.data(), s.size()); }
  unsigned offset() const { return static_cast<unsigned>(text_.size()); }

  // Adds `value` with the mapping of its characters; returns the region index.
  int add_mapped(const std::string& value, const std::vector<source_position>& characters, source_position fallback,
                 bool suppress = false) {
    check_region region;
    region.begin = offset();
    add(value);
    region.end = offset() + 1;  // the character right after maps to the end of the literal
    region.characters = characters;
    region.fallback = std::move(fallback);
    region.suppress = suppress;
    state_.regions.push_back(std::move(region));
    return static_cast<int>(state_.regions.size() - 1);
  }
  // Everything between two offsets maps to `fallback`.
  void map_span(unsigned begin, unsigned end, source_position fallback, bool suppress) {
    check_region region;
    region.begin = begin;
    region.end = end;
    region.fallback = std::move(fallback);
    region.suppress = suppress;
    state_.regions.push_back(std::move(region));
  }

  std::string take() { return std::move(text_); }

 private:
  check_state& state_;
  std::string text_;
};

// ---------------------------------------------------------------------------------------------
// Looking the check buffer's declarations up once Sema has parsed them.

struct judge_context {
  clang::ASTContext& context;
  const clang::SourceManager& sm;
  const check_state& state;
};

// The declaration `name` of the check buffer, which is in the namespace of `fn`.
clang::NamedDecl* find_checked(const clang::ASTContext& context, const clang::FunctionDecl& fn,
                               const std::string& name) {
  const clang::DeclContext* dc = fn.getDeclContext();
  while (!dc->isFileContext()) dc = dc->getParent();
  for (clang::NamedDecl* d : dc->lookup(&context.Idents.get(name))) return d;
  return nullptr;
}

// The value of one of the check buffer's `constexpr bool`s, unless it could not be computed.
std::optional<bool> evaluate(const clang::ASTContext& context, clang::NamedDecl* d) {
  auto* var = llvm::dyn_cast_or_null<clang::VarDecl>(d);
  if (var == nullptr || var->isInvalidDecl() || var->getInit() == nullptr) return std::nullopt;
  if (var->getInit()->containsErrors() || var->getInit()->isValueDependent()) return std::nullopt;
  clang::Expr::EvalResult value;
  if (!var->getInit()->EvaluateAsRValue(value, context) || !value.Val.isInt()) return std::nullopt;
  return value.Val.getInt().getBoolValue();
}

const check_region& region_of(const judge_context& c, int index) {
  return c.state.regions[static_cast<std::size_t>(index)];
}

// The key function of `item` when Clang found no error in its key expression, or null.
const clang::FunctionDecl* checked_key_function(const judge_context& c, const check_item& item) {
  if (item.key_region < 0 || region_of(c, item.key_region).errors != 0) return nullptr;
  const auto* key_fn =
      llvm::dyn_cast_or_null<clang::FunctionDecl>(find_checked(c.context, *item.function, item.key_function));
  return key_fn != nullptr && !key_fn->isInvalidDecl() ? key_fn : nullptr;
}

// The names a key function uses that are not its parameters (nor constexpr constants, nor a
// lambda's own variables): globals, static members.
std::vector<const clang::DeclRefExpr*> non_parameter_references(const clang::FunctionDecl& key_fn) {
  struct reference_finder : clang::RecursiveASTVisitor<reference_finder> {
    const clang::FunctionDecl* owner = nullptr;
    std::vector<const clang::DeclRefExpr*> offending;
    bool VisitDeclRefExpr(clang::DeclRefExpr* e) {
      const auto* var = llvm::dyn_cast<clang::VarDecl>(e->getDecl());
      if (var == nullptr) return true;
      if (const auto* param = llvm::dyn_cast<clang::ParmVarDecl>(var); param && param->getDeclContext() == owner)
        return true;
      if (var->isLocalVarDeclOrParm() && var->getDeclContext() != owner) return true;  // inside a lambda
      if (var->isConstexpr()) return true;  // a named constant is not state
      offending.push_back(e);
      return true;
    }
  } finder;
  finder.owner = &key_fn;
  finder.TraverseStmt(key_fn.getBody());
  return std::move(finder.offending);
}

// Whether <idem/json_codec.hpp> (or anything declaring idem::json_codec) was included.
bool json_codec_declared(const clang::ASTContext& context) {
  const clang::TranslationUnitDecl* tu = context.getTranslationUnitDecl();
  for (const clang::NamedDecl* ns : tu->lookup(&context.Idents.get("idem")))
    if (const auto* n = llvm::dyn_cast<clang::NamespaceDecl>(ns))
      if (!n->lookup(&context.Idents.get("json_codec")).empty()) return true;
  return false;
}

// What a codec needs, for the message when idem::codec_for fails.
std::string codec_requirement(const std::string& codec) {
  if (codec.find("json_codec") != std::string::npos)
    return "idem::json_codec needs a type nlohmann::json converts both ways: give it to_json and from_json, for "
           "example with NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE";
  return "it needs a default constructor, payload encode(const T&) const, and T decode(const payload&) const or a "
         "template decode<T>";
}

// ---------------------------------------------------------------------------------------------
// The rules: what each adds to a function's part of the check buffer (Clang's own errors there are
// the rule's diagnostics, mapped onto the attribute's literals), and what it judges once Sema has
// parsed it.

// The key expression, in a function with the annotated function's parameters.
void write_key_expression(check_writer& w, const function_spec& spec, check_item& item) {
  if (spec.key.empty()) return;
  item.key_function = "idem_check_key_" + std::to_string(item.spec_index);
  w.add("[[maybe_unused]] inline auto " + item.key_function + "(");
  for (std::size_t p = 0; p < spec.facts.parameters.size(); ++p) {
    const parameter& param = spec.facts.parameters[p];
    w.add((p ? ", " : "") + std::string("[[maybe_unused]] ") + param.spelled_key_type() + " ");
    // Clang's notes about a parameter ("'event' declared here") point at the real one.
    const std::string name = param.name.empty() ? "idem_unnamed_" + std::to_string(p) : param.name;
    w.add_mapped(name, {}, param.name.empty() ? spec.position : param.position);
  }
  w.add(") {\n  return (");
  item.key_region = w.add_mapped(spec.key, spec.key_characters, spec.key_position);
  w.add("\n);\n}\n");
}

// Only parameters: no globals, no static members.
void judge_key_parameters_only(const judge_context& c, const function_spec& spec, const check_item& item,
                               std::vector<diagnostic>& out) {
  const clang::FunctionDecl* key_fn = checked_key_function(c, item);
  if (key_fn == nullptr) return;
  const check_region& region = region_of(c, item.key_region);
  for (const clang::DeclRefExpr* e : non_parameter_references(*key_fn)) {
    const unsigned offset = c.sm.getFileOffset(c.sm.getFileLoc(e->getLocation()));
    const source_position where = offset >= region.begin && offset - region.begin < region.characters.size()
                                      ? region.characters[offset - region.begin]
                                      : spec.key_position;
    out.push_back({severity::error, where,
                   "the key expression may only use the parameters of '" + spec.facts.qualified_name + "'; '" +
                       e->getDecl()->getQualifiedNameAsString() +
                       "' is not one of them (a key must be computable from the call alone)"});
  }
}

// Whether the key's type is a key type; errors here repeat the key's own, so they are dropped.
void write_key_type(check_writer& w, const function_spec& spec, check_item& item) {
  if (spec.key.empty()) return;
  std::string declvals;
  for (std::size_t p = 0; p < spec.facts.parameters.size(); ++p)
    declvals += (p ? ", " : "") + std::string("std::declval<") + spec.facts.parameters[p].spelled_key_type() + ">()";
  item.key_ok = "idem_check_key_ok_" + std::to_string(item.spec_index);
  const unsigned ok_begin = w.offset();
  w.add("[[maybe_unused]] inline constexpr bool " + item.key_ok + " = ::idem::key_value<decltype(" +
        item.key_function + "(" + declvals + "))>;\n");
  w.map_span(ok_begin, w.offset(), spec.key_position, /*suppress=*/true);
}

void judge_key_type(const judge_context& c, const function_spec& spec, const check_item& item,
                    std::vector<diagnostic>& out) {
  const clang::FunctionDecl* key_fn = checked_key_function(c, item);
  if (key_fn == nullptr || !non_parameter_references(*key_fn).empty()) return;
  const std::optional<bool> ok = evaluate(c.context, find_checked(c.context, *item.function, item.key_ok));
  if (!ok || *ok) return;
  out.push_back({severity::error, spec.key_position,
                 "the key expression has type '" + key_fn->getReturnType().getAsString(printing_policy(c.context)) +
                     "'; a key must be an integral value or a string "
                     "(anything convertible to std::string_view)"});
}

// The codec, as an alias: Clang says whether it names a type.
void write_codec_type(check_writer& w, const function_spec& spec, check_item& item) {
  if (spec.codec.empty()) return;
  w.add("using idem_check_codec_" + std::to_string(item.spec_index) + " = ");
  item.codec_region = w.add_mapped(spec.codec, spec.codec_characters, spec.codec_position);
  w.add("\n;\n");
}

// Clang's error says the name is unknown; say which header declares idem's own codec.
void judge_json_codec_include(const judge_context& c, const function_spec& spec, const check_item& item,
                              std::vector<diagnostic>& out) {
  if (item.codec_region < 0 || region_of(c, item.codec_region).errors == 0 ||
      spec.codec.find("json_codec") == std::string::npos || json_codec_declared(c.context))
    return;
  out.push_back({severity::note, spec.codec_position,
                 "idem::json_codec is declared in <idem/json_codec.hpp>: include it in the "
                 "annotated header"});
}

// Whether the codec encodes and decodes what a duplicate is given back (idem::codec_for).
void write_codec_concept(check_writer& w, const function_spec& spec, check_item& item) {
  if (spec.codec.empty()) return;
  const std::string n = std::to_string(item.spec_index);
  item.codec_ok = "idem_check_codec_ok_" + n;
  const unsigned ok_begin = w.offset();
  w.add("[[maybe_unused]] inline constexpr bool " + item.codec_ok + " = ::idem::codec_for<idem_check_codec_" + n +
        ", " + spelled_replayed_type(spec.facts) + ">;\n");
  w.map_span(ok_begin, w.offset(), spec.codec_position, /*suppress=*/true);
}

void judge_codec_concept(const judge_context& c, const function_spec& spec, const check_item& item,
                         std::vector<diagnostic>& out) {
  if (item.codec_region < 0 || region_of(c, item.codec_region).errors != 0) return;
  const std::optional<bool> ok = evaluate(c.context, find_checked(c.context, *item.function, item.codec_ok));
  if (!ok || *ok) return;
  out.push_back({severity::error, spec.codec_position,
                 "codec '" + spec.codec + "' cannot encode and decode '" + replayed_type(spec.facts) +
                     "': idem::codec_for<" + spec.codec + ", " + replayed_type(spec.facts) + "> is not satisfied (" +
                     codec_requirement(spec.codec) + ")"});
}

struct sema_rule {
  std::string_view name;
  void (*write)(check_writer& w, const function_spec& spec, check_item& item);  // null: adds nothing
  void (*judge)(const judge_context& c, const function_spec& spec, const check_item& item,
                std::vector<diagnostic>& out);  // null: Clang's errors say it all
};

// In the order they write and then judge.
constexpr sema_rule sema_rules[] = {
    {"key-expression", write_key_expression, nullptr},
    {"key-parameters-only", nullptr, judge_key_parameters_only},
    {"key-type", write_key_type, judge_key_type},
    {"codec-type", write_codec_type, nullptr},
    {"json-codec-include", nullptr, judge_json_codec_include},
    {"codec-concept", write_codec_concept, judge_codec_concept},
};

// ---------------------------------------------------------------------------------------------
// The buffer: written, parsed, judged.

// The part of the buffer for `spec`, in the namespace of `fn`.
check_item write_function_checks(check_writer& w, const function_spec& spec, const clang::FunctionDecl& fn,
                                 std::size_t index) {
  check_item item;
  item.spec_index = index;
  item.function = &fn;
  const auto [open, close] = enclosing_namespaces(fn);
  const unsigned chunk_begin = w.offset();
  w.add(open + "\n");
  for (const sema_rule& rule : sema_rules)
    if (rule.write != nullptr) rule.write(w, spec, item);
  w.add(close + "\n");
  w.map_span(chunk_begin, w.offset(), spec.position, /*suppress=*/false);
  return item;
}

std::string write_check_buffer(check_state& state, const std::vector<function_spec>& specs,
                               const std::vector<const clang::FunctionDecl*>& functions,
                               std::vector<check_item>& items) {
  check_writer w(state);
  w.add("#include <idem/invoke.hpp>\n#include <utility>\n");
  // An error in these includes (say, <idem/invoke.hpp> not found) lands on the first attribute.
  w.map_span(0, w.offset(), specs.front().position, /*suppress=*/false);
  for (std::size_t i = 0; i < specs.size(); ++i)
    if (!specs[i].key.empty() || !specs[i].codec.empty())
      items.push_back(write_function_checks(w, specs[i], *functions[i], i));
  return w.take();
}

// Enters the buffer right where the header ended, and lets the same parser continue; false when it
// cannot be entered. The end of the header ended the translation unit for Sema; give it its scope
// back first. (Incremental processing would keep the lexer instead, but then the preprocessor hands
// out a second end of file token, which the TokenCollector cannot map.)
bool parse_check_buffer(clang::CompilerInstance& ci, clang::Parser& parser, collecting_consumer& consumer,
                        check_state& state, std::string text) {
  clang::SourceManager& sm = ci.getSourceManager();
  ci.getSema().TUScope = parser.getCurScope();
  std::unique_ptr<llvm::MemoryBuffer> buffer = llvm::MemoryBuffer::getMemBufferCopy(text, "<idem-annotate check>");
  state.file = sm.createFileID(std::move(buffer), clang::SrcMgr::C_User, 0, 0, sm.getLocForEndOfFile(sm.getMainFileID()));
  consumer.set_check_state(&state);
  if (ci.getPreprocessor().EnterSourceFile(state.file, nullptr, SourceLocation())) return false;
  parser.ConsumeToken();  // the end of the header
  clang::Parser::DeclGroupPtrTy group;
  clang::Sema::ModuleImportState import_state = clang::Sema::ModuleImportState::NotACXX20Module;
  while (!parser.ParseTopLevelDecl(group, import_state)) {
  }
  return true;
}

}  // namespace

void check_with_sema(clang::CompilerInstance& ci, clang::Parser& parser, collecting_consumer& consumer,
                     const std::vector<function_spec>& specs, const std::vector<const clang::FunctionDecl*>& functions,
                     std::vector<diagnostic>& out) {
  check_state state;
  std::vector<check_item> items;
  std::string text = write_check_buffer(state, specs, functions, items);
  if (parse_check_buffer(ci, parser, consumer, state, std::move(text))) {
    const judge_context c{ci.getASTContext(), ci.getSourceManager(), state};
    for (const check_item& item : items)
      for (const sema_rule& rule : sema_rules)
        if (rule.judge != nullptr) rule.judge(c, specs[item.spec_index], item, out);
  }
  consumer.set_check_state(nullptr);
}

}  // namespace idem::annotate
