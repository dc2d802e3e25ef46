// annotator/src/frontend.cpp — see frontend.hpp: the front-end action, and analyze().
//
// One compiler instance, one parse, two inputs:
//   1. The header, parsed as usual while a syntax::TokenCollector records the preprocessed token
//      stream, by a parser that this action owns (instead of clang::ParseAST), so that it
//      outlives the end of the header.
//   2. At that end the attributes are found in the token stream, attached to declarations and
//      validated; then an in-memory "check" buffer is entered into the same preprocessor and
//      parsed by the same Parser and Sema: one function per key expression, one alias per codec,
//      in the namespace of the annotated function. Clang's own errors in that buffer are mapped
//      back, character by character, onto the attribute's string literals.
// Reusing the instance keeps the generator close to the cost of `clang++ -fsyntax-only`.
// The other Clang-side parts, one job each: clang_diagnostics.hpp (collecting Clang's diagnostics),
// attribute_scan (finding attributes in the token stream; literal.cpp decodes their literals
// without Clang), declaration_facts (facts about declarations; with return_facts and
// endpoint_facts), guarded_classes (every idem::guarded<C>), sema_check (the check buffer).
#include "frontend.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Parse/Parser.h>
#include <clang/Sema/Sema.h>
#include <clang/Tooling/Syntax/Tokens.h>
#include <clang/Tooling/Tooling.h>

#include "attribute_scan.hpp"
#include "clang_diagnostics.hpp"
#include "declaration_facts.hpp"
#include "guarded_classes.hpp"
#include "sema_check.hpp"
#include "validator.hpp"

#ifndef IDEM_ANNOTATE_CLANG
#define IDEM_ANNOTATE_CLANG "clang++"
#endif

namespace idem::annotate {

namespace {

struct shared_state {
  const analysis_request* request = nullptr;
  analysis_result* result = nullptr;
  collecting_consumer* consumer = nullptr;
};

class annotate_action : public clang::ASTFrontendAction {
 public:
  explicit annotate_action(shared_state& state) : state_(state) {}

 protected:
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance&, llvm::StringRef) override {
    return std::make_unique<clang::ASTConsumer>();
  }

  bool BeginSourceFileAction(clang::CompilerInstance& ci) override {
    clang::Preprocessor& pp = ci.getPreprocessor();
    collector_ = std::make_unique<clang::syntax::TokenCollector>(pp);
    return true;
  }

  void ExecuteAction() override;

 private:
  void analyze_translation_unit(clang::CompilerInstance& ci, clang::Parser& parser);

  shared_state& state_;
  std::unique_ptr<clang::syntax::TokenCollector> collector_;
};

void annotate_action::ExecuteAction() {
  clang::CompilerInstance& ci = getCompilerInstance();
  if (!ci.hasPreprocessor()) return;
  if (!ci.hasSema()) ci.createSema(getTranslationUnitKind(), nullptr);
  clang::Sema& sema = ci.getSema();
  clang::Preprocessor& pp = ci.getPreprocessor();

  // What clang::ParseAST does, except that the parser outlives the end of the header.
  auto parser = std::make_unique<clang::Parser>(pp, sema, /*SkipFunctionBodies=*/false);
  pp.EnterMainSourceFile();
  parser->Initialize();
  clang::Parser::DeclGroupPtrTy group;
  clang::Sema::ModuleImportState import_state;
  for (bool at_end = parser->ParseFirstTopLevelDecl(group, import_state); !at_end;
       at_end = parser->ParseTopLevelDecl(group, import_state)) {
  }
  analyze_translation_unit(ci, *parser);
}

void annotate_action::analyze_translation_unit(clang::CompilerInstance& ci, clang::Parser& parser) {
  analysis_result& result = *state_.result;
  const SourceManager& sm = ci.getSourceManager();
  clang::ASTContext& context = ci.getASTContext();
  const bool header_ok = !ci.getDiagnostics().hasErrorOccurred();

  clang::syntax::TokenBuffer tokens = std::move(*collector_).consume();
  collector_.reset();
  std::vector<found_attribute> attributes = scan_attributes(sm, tokens.expandedTokens(), result.diagnostics, true);
  // The annotations of included headers (their own generation reports their mistakes).
  std::vector<diagnostic> ignored;
  std::vector<found_attribute> included = scan_attributes(sm, tokens.expandedTokens(), ignored, false);
  if (attributes.empty() && included.empty()) return;

  const std::vector<clang::Decl*> declarations = main_file_declarations(context);

  const llvm::ArrayRef<clang::syntax::Token> expanded = tokens.expandedTokens();
  std::vector<function_spec> checked;                  // every attribute on a function, even invalid
  std::vector<const clang::FunctionDecl*> functions;   // parallel to `checked`
  std::map<const clang::FunctionDecl*, source_position> annotated;  // canonical decl -> first attribute
  std::vector<function_spec> specs;
  std::vector<const clang::FunctionDecl*> spec_functions;  // parallel to `specs`
  for (found_attribute& found : attributes) {
    const raw_attribute& attribute = found.attribute;
    const std::string name = attribute.spelling;
    if (found.close_index == 0) {
      result.diagnostics.push_back({severity::error, attribute.position, "unterminated attribute specifier"});
      continue;
    }
    const SourceLocation close = sm.getExpansionLoc(expanded[found.close_index].location());
    // The first declaration whose name comes after the attribute.
    auto next = std::find_if(declarations.begin(), declarations.end(), [&](const clang::Decl* d) {
      return sm.isBeforeInTranslationUnit(close, sm.getExpansionLoc(d->getLocation()));
    });
    const clang::FunctionDecl* fn = next == declarations.end() ? nullptr : llvm::dyn_cast<clang::FunctionDecl>(*next);
    if (fn != nullptr && !stands_before(sm, expanded, found.close_index, *fn)) fn = nullptr;
    if (fn == nullptr) {  // rule "attribute-placement"
      result.diagnostics.push_back({severity::error, attribute.position,
                                    name + " must stand before a function declaration, as in [[" + name +
                                        "(key = \"event.id\")]] void on(const Event& event);"});
      continue;
    }
    const clang::FunctionDecl* canonical = fn->getCanonicalDecl();
    if (auto [it, inserted] = annotated.emplace(canonical, attribute.position); !inserted) {  // rule "annotated-once"
      result.diagnostics.push_back(
          {severity::error, attribute.position, "'" + fn->getQualifiedNameAsString() + "' is annotated twice"});
      result.diagnostics.push_back({severity::note, it->second, "first annotation is here"});
      continue;
    }
    validation_result validated = validate(attribute, facts_of(*fn, context));
    for (diagnostic& d : validated.diagnostics) result.diagnostics.push_back(std::move(d));
    if (validated.spec) {
      specs.push_back(*validated.spec);
      spec_functions.push_back(canonical);
    }
    // Checked by Sema even when other arguments are wrong: every mistake in one run.
    checked.push_back(std::move(validated.partial));
    functions.push_back(fn);
  }
  for (diagnostic& d : check_scope_conflicts(specs)) result.diagnostics.push_back(std::move(d));

  std::map<const clang::FunctionDecl*, const function_spec*> by_function;
  for (std::size_t i = 0; i < specs.size(); ++i) by_function.emplace(spec_functions[i], &specs[i]);
  result.classes = find_guarded_classes(context, expanded, std::move(included), by_function, declarations,
                                        result.diagnostics);
  result.specs = std::move(specs);

  if (header_ok && state_.request->check_keys && !checked.empty())
    check_with_sema(ci, parser, *state_.consumer, checked, functions, result.diagnostics);
}

}  // namespace

analysis_result analyze(const analysis_request& request) {
  analysis_result result;
  collecting_consumer consumer(result.diagnostics);
  shared_state state{&request, &result, &consumer};

  // The driver finds the GCC installation (libstdc++) relative to the compiler it thinks it is.
  std::vector<std::string> args{IDEM_ANNOTATE_CLANG, "-fsyntax-only", "-x", "c++"};
  bool has_std = false;
  for (const std::string& arg : request.compiler_args) {
    if (arg.rfind("-std=", 0) == 0) has_std = true;
    args.push_back(arg);
  }
  if (!has_std) args.push_back("-std=c++20");
  // Only errors matter here: the real compile reports warnings. idem-annotate prints every
  // diagnostic itself, so Clang's own "N errors generated." (which counts only Clang's) is off.
  args.push_back("-w");
  args.push_back("-fno-caret-diagnostics");
  if (!request.resource_dir.empty()) args.push_back("-resource-dir=" + request.resource_dir);
  if (!request.idem_include_dir.empty()) {
    args.push_back("-idirafter");
    args.push_back(request.idem_include_dir);
  }
  args.push_back(request.source);

  llvm::IntrusiveRefCntPtr<clang::FileManager> files(
      new clang::FileManager(clang::FileSystemOptions(), llvm::vfs::getRealFileSystem()));
  clang::tooling::ToolInvocation invocation(args, std::make_unique<annotate_action>(state), files.get());
  invocation.setDiagnosticConsumer(&consumer);
  const bool ran = invocation.run();

  // Every file the parse read, for the depfile.
  std::set<std::string> seen;
  llvm::SmallVector<clang::OptionalFileEntryRef, 64> entries;
  files->GetUniqueIDMapping(entries);
  for (const clang::OptionalFileEntryRef& entry : entries)
    if (entry) seen.insert(entry->getName().str());
  result.dependencies.assign(seen.begin(), seen.end());

  const bool any_error = std::any_of(result.diagnostics.begin(), result.diagnostics.end(),
                                     [](const diagnostic& d) { return d.level == severity::error; });
  result.ok = ran && !any_error;
  if (!ran && !any_error)
    result.diagnostics.push_back(
        {severity::error, {request.source, 0, 0},
         "idem-annotate: Clang reported an error that could not be placed on an attribute; rerun with "
         "--no-key-check to see whether the key checks cause it, and report it"});
  if (!result.ok) {
    result.specs.clear();
    result.classes.clear();
  }
  return result;
}

}  // namespace idem::annotate

