// annotator/src/sema_check.cpp — see sema_check.hpp.
#include "sema_check.hpp"

#include <memory>
#include <optional>
#include <string>

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

// What a codec needs, for the message when idem::codec_for fails.
std::string codec_requirement(const std::string& codec) {
  if (codec.find("json_codec") != std::string::npos)
    return "idem::json_codec needs a type nlohmann::json converts both ways: give it to_json and from_json, for "
           "example with NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE";
  return "it needs a default constructor, payload encode(const T&) const, and T decode(const payload&) const or a "
         "template decode<T>";
}

}  // namespace

void check_with_sema(clang::CompilerInstance& ci, clang::Parser& parser, collecting_consumer& consumer,
                     const std::vector<function_spec>& specs, const std::vector<const clang::FunctionDecl*>& functions,
                     std::vector<diagnostic>& out) {
  clang::SourceManager& sm = ci.getSourceManager();
  clang::ASTContext& context = ci.getASTContext();
  clang::Preprocessor& pp = ci.getPreprocessor();

  check_state state;
  check_writer w(state);
  std::vector<check_item> items;
  w.add("#include <idem/invoke.hpp>\n#include <utility>\n");
  // An error in these includes (say, <idem/invoke.hpp> not found) lands on the first attribute.
  w.map_span(0, w.offset(), specs.front().position, /*suppress=*/false);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const function_spec& spec = specs[i];
    if (spec.key.empty() && spec.codec.empty()) continue;
    const clang::FunctionDecl& fn = *functions[i];
    check_item item;
    item.spec_index = i;
    item.function = &fn;
    const std::string n = std::to_string(i);
    const auto [open, close] = enclosing_namespaces(fn);
    const unsigned chunk_begin = w.offset();
    w.add(open + "\n");
    if (!spec.key.empty()) {
      // The key expression, in a function with the annotated function's parameters.
      item.key_function = "idem_check_key_" + n;
      std::string declvals;
      w.add("[[maybe_unused]] inline auto " + item.key_function + "(");
      for (std::size_t p = 0; p < spec.facts.parameters.size(); ++p) {
        const parameter& param = spec.facts.parameters[p];
        w.add((p ? ", " : "") + std::string("[[maybe_unused]] ") + param.spelled_key_type() + " ");
        // Clang's notes about a parameter ("'event' declared here") point at the real one.
        const std::string name = param.name.empty() ? "idem_unnamed_" + std::to_string(p) : param.name;
        w.add_mapped(name, {}, param.name.empty() ? spec.position : param.position);
        declvals += (p ? ", " : "") + std::string("std::declval<") + param.spelled_key_type() + ">()";
      }
      w.add(") {\n  return (");
      item.key_region = w.add_mapped(spec.key, spec.key_characters, spec.key_position);
      w.add("\n);\n}\n");
      // Whether its type is a key type; errors here repeat the ones above, so they are dropped.
      item.key_ok = "idem_check_key_ok_" + n;
      const unsigned ok_begin = w.offset();
      w.add("[[maybe_unused]] inline constexpr bool " + item.key_ok + " = ::idem::key_value<decltype(" +
            item.key_function + "(" + declvals + "))>;\n");
      w.map_span(ok_begin, w.offset(), spec.key_position, /*suppress=*/true);
    }
    if (!spec.codec.empty()) {
      w.add("using idem_check_codec_" + n + " = ");
      item.codec_region = w.add_mapped(spec.codec, spec.codec_characters, spec.codec_position);
      w.add("\n;\n");
      item.codec_ok = "idem_check_codec_ok_" + n;
      const unsigned ok_begin = w.offset();
      w.add("[[maybe_unused]] inline constexpr bool " + item.codec_ok + " = ::idem::codec_for<idem_check_codec_" + n +
            ", " + spelled_replayed_type(spec.facts) + ">;\n");
      w.map_span(ok_begin, w.offset(), spec.codec_position, /*suppress=*/true);
    }
    w.add(close + "\n");
    w.map_span(chunk_begin, w.offset(), spec.position, /*suppress=*/false);
    items.push_back(std::move(item));
  }

  // Enter the buffer right where the header ended, and let the same parser continue. The end of
  // the header ended the translation unit for Sema; give it its scope back first. (Incremental
  // processing would keep the lexer instead, but then the preprocessor hands out a second end of
  // file token, which the TokenCollector cannot map.)
  ci.getSema().TUScope = parser.getCurScope();
  std::unique_ptr<llvm::MemoryBuffer> buffer = llvm::MemoryBuffer::getMemBufferCopy(w.take(), "<idem-annotate check>");
  state.file = sm.createFileID(std::move(buffer), clang::SrcMgr::C_User, 0, 0, sm.getLocForEndOfFile(sm.getMainFileID()));
  consumer.set_check_state(&state);
  if (pp.EnterSourceFile(state.file, nullptr, SourceLocation())) {
    consumer.set_check_state(nullptr);
    return;
  }
  parser.ConsumeToken();  // the end of the header
  clang::Parser::DeclGroupPtrTy group;
  clang::Sema::ModuleImportState import_state = clang::Sema::ModuleImportState::NotACXX20Module;
  while (!parser.ParseTopLevelDecl(group, import_state)) {
  }

  // Look the generated declarations up by name and judge what Sema could not say by itself.
  auto find = [&](const clang::FunctionDecl& fn, const std::string& name) -> clang::NamedDecl* {
    const clang::DeclContext* dc = fn.getDeclContext();
    while (!dc->isFileContext()) dc = dc->getParent();
    for (clang::NamedDecl* d : dc->lookup(&context.Idents.get(name))) return d;
    return nullptr;
  };
  auto evaluate = [&](clang::NamedDecl* d) -> std::optional<bool> {
    auto* var = llvm::dyn_cast_or_null<clang::VarDecl>(d);
    if (var == nullptr || var->isInvalidDecl() || var->getInit() == nullptr) return std::nullopt;
    if (var->getInit()->containsErrors() || var->getInit()->isValueDependent()) return std::nullopt;
    clang::Expr::EvalResult value;
    if (!var->getInit()->EvaluateAsRValue(value, context) || !value.Val.isInt()) return std::nullopt;
    return value.Val.getInt().getBoolValue();
  };

  for (const check_item& item : items) {
    const function_spec& spec = specs[item.spec_index];
    if (item.key_region >= 0 && state.regions[static_cast<std::size_t>(item.key_region)].errors == 0) {
      auto* key_fn = llvm::dyn_cast_or_null<clang::FunctionDecl>(find(*item.function, item.key_function));
      if (key_fn != nullptr && !key_fn->isInvalidDecl()) {
        // Only parameters: no globals, no static members.
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
        finder.owner = key_fn;
        finder.TraverseStmt(key_fn->getBody());
        for (const clang::DeclRefExpr* e : finder.offending) {
          const unsigned offset = sm.getFileOffset(sm.getFileLoc(e->getLocation()));
          const check_region& region = state.regions[static_cast<std::size_t>(item.key_region)];
          const source_position where = offset >= region.begin && offset - region.begin < region.characters.size()
                                            ? region.characters[offset - region.begin]
                                            : spec.key_position;
          out.push_back(
              {severity::error, where,
               "the key expression may only use the parameters of '" + spec.facts.qualified_name + "'; '" +
                   e->getDecl()->getQualifiedNameAsString() +
                   "' is not one of them (a key must be computable from the call alone)"});
        }
        if (finder.offending.empty()) {
          const std::optional<bool> ok = evaluate(find(*item.function, item.key_ok));
          if (ok && !*ok) {
            out.push_back({severity::error, spec.key_position,
                                          "the key expression has type '" +
                                              key_fn->getReturnType().getAsString(printing_policy(context)) +
                                              "'; a key must be an integral value or a string "
                                              "(anything convertible to std::string_view)"});
          }
        }
      }
    }
    // Clang's error says the name is unknown; say which header declares idem's own codec.
    if (item.codec_region >= 0 && state.regions[static_cast<std::size_t>(item.codec_region)].errors > 0 &&
        spec.codec.find("json_codec") != std::string::npos) {
      const auto* json_codec_declared = [&]() -> const clang::NamedDecl* {
        const clang::TranslationUnitDecl* tu = context.getTranslationUnitDecl();
        for (const clang::NamedDecl* ns : tu->lookup(&context.Idents.get("idem")))
          if (const auto* n = llvm::dyn_cast<clang::NamespaceDecl>(ns))
            for (const clang::NamedDecl* d : n->lookup(&context.Idents.get("json_codec"))) return d;
        return nullptr;
      }();
      if (json_codec_declared == nullptr)
        out.push_back({severity::note, spec.codec_position,
                                      "idem::json_codec is declared in <idem/json_codec.hpp>: include it in the "
                                      "annotated header"});
    }
    if (item.codec_region >= 0 && state.regions[static_cast<std::size_t>(item.codec_region)].errors == 0) {
      const std::optional<bool> ok = evaluate(find(*item.function, item.codec_ok));
      if (ok && !*ok) {
        out.push_back(
            {severity::error, spec.codec_position,
             "codec '" + spec.codec + "' cannot encode and decode '" + replayed_type(spec.facts) +
                 "': idem::codec_for<" + spec.codec + ", " + replayed_type(spec.facts) + "> is not satisfied (" +
                 codec_requirement(spec.codec) +
                 ")"});
      }
    }
  }
  consumer.set_check_state(nullptr);
}

}  // namespace idem::annotate
