// annotator/src/guarded_classes.cpp — see guarded_classes.hpp.
#include "guarded_classes.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include <clang/AST/Attr.h>
#include <clang/AST/CXXInheritance.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>

#include "clang_diagnostics.hpp"
#include "declaration_facts.hpp"

namespace idem::annotate {

namespace {

// Whether `method` overrides `base`, directly or through other overrides.
bool overrides(const clang::CXXMethodDecl& method, const clang::CXXMethodDecl& base) {
  for (const clang::CXXMethodDecl* o : method.overridden_methods())
    if (o->getCanonicalDecl() == base.getCanonicalDecl() || overrides(*o, base)) return true;
  return false;
}

std::string generated_header_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const auto dot = name.find_last_of('.');
  return (dot == std::string::npos ? name : name.substr(0, dot)) + ".idem.hpp";
}

std::string file_name_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Whether a class can have an idem::guarded<C>: a named, non-final class defined in the header,
// that is no template, and that code outside it can name.
bool gets_guarded_class(const clang::CXXRecordDecl& record) {
  if (!record.isThisDeclarationADefinition() || record.isLambda() || record.isUnion() ||
      record.getIdentifier() == nullptr || record.isTemplated() ||
      llvm::isa<clang::ClassTemplateSpecializationDecl>(record) || record.isLocalClass() ||
      !record.isExternallyVisible() || record.hasAttr<clang::FinalAttr>())
    return false;
  for (const clang::DeclContext* dc = &record; dc != nullptr && dc->isRecord(); dc = dc->getParent())
    if (llvm::cast<clang::Decl>(dc)->getAccess() == clang::AS_private ||
        llvm::cast<clang::Decl>(dc)->getAccess() == clang::AS_protected)
      return false;  // nobody outside could name idem::guarded<C>
  return true;
}

// ---------------------------------------------------------------------------------------------
// The rules about an un-annotated override of an annotated method, in a class that gets an
// idem::guarded<C>: the first that reports means the wrapper does not guard the method.

struct override_check {
  const clang::ASTContext& context;
  const SourceManager& sm;
  const clang::CXXRecordDecl& record;       // the class that gets the wrapper
  const clang::CXXMethodDecl& overrider;    // the override on the way to it
  const clang::CXXMethodDecl& method;       // the annotated method
  std::vector<diagnostic>& out;

  void error(std::string message) const {
    out.push_back({severity::error, position_of(sm, sm.getExpansionLoc(overrider.getLocation())), std::move(message)});
  }
};

// A final overrider cannot be overridden by the wrapper.
bool override_final(const override_check& c) {
  if (!c.overrider.hasAttr<clang::FinalAttr>()) return false;
  c.error("'" + c.overrider.getQualifiedNameAsString() + "' is final, so idem::guarded<" +
          c.record.getNameAsString() + "> cannot guard the annotated '" + c.method.getQualifiedNameAsString() +
          "' it overrides; remove final, or make " + c.record.getNameAsString() +
          " final (then only idem::invoke guards it)");
  return true;
}

// Calls on C use the overrider's default arguments; idem::guarded<C> passes the policy's.
bool override_default_arguments(const override_check& c) {
  const function_facts mine = facts_of(c.overrider, c.context);
  const function_facts theirs = facts_of(c.method, c.context);
  for (std::size_t p = 0; p < mine.parameters.size() && p < theirs.parameters.size(); ++p)
    if (mine.parameters[p].default_argument != theirs.parameters[p].default_argument) {
      c.error("'" + c.overrider.getQualifiedNameAsString() + "' overrides the annotated '" +
              c.method.getQualifiedNameAsString() + "' with other default arguments, which idem::guarded<" +
              c.record.getNameAsString() +
              "> cannot keep; give both the same default arguments, or annotate the override");
      return true;
    }
  return false;
}

struct override_rule {
  std::string_view name;
  bool (*check)(const override_check& c);  // true when it reported an error
};

constexpr override_rule override_rules[] = {
    {"override-final", override_final},
    {"override-default-arguments", override_default_arguments},
};

// ---------------------------------------------------------------------------------------------
// The finder.

// Every idem::guarded<C> of the header: per class defined in it, the annotated methods it has,
// declared in it or inherited from annotated bases (in this header or an included one).
class guarded_class_finder {
 public:
  guarded_class_finder(const clang::ASTContext& context, llvm::ArrayRef<clang::syntax::Token> expanded,
                       std::vector<found_attribute> included,
                       const std::map<const clang::FunctionDecl*, const function_spec*>& specs,
                       std::vector<diagnostic>& out)
      : context_(context), sm_(context.getSourceManager()), expanded_(expanded), included_(std::move(included)),
        specs_(specs), out_(out) {}

  std::optional<guarded_class> find(const clang::CXXRecordDecl& record) {
    if (!gets_guarded_class(record)) return std::nullopt;
    guarded_class cls;
    cls.name = record.getQualifiedNameAsString();
    cls.code_name = "::" + cls.name;
    add_own_methods(record, cls);
    add_inherited_methods(record, cls);
    if (cls.methods.empty()) return std::nullopt;
    return cls;
  }

 private:
  // The methods annotated in the class itself. An endpoint is called by the server through
  // idem::http::route, not through guarded<C>.
  void add_own_methods(const clang::CXXRecordDecl& record, guarded_class& cls) const {
    for (const clang::CXXMethodDecl* method : record.methods())
      if (auto it = specs_.find(method->getCanonicalDecl());
          it != specs_.end() && !method->isStatic() && !it->second->facts.http_endpoint)
        cls.methods.push_back({it->second->facts, it->second->position, false});
  }

  // The annotated methods of its bases that the class has under their names, with the generated
  // headers of those annotated in other headers.
  void add_inherited_methods(const clang::CXXRecordDecl& record, guarded_class& cls) {
    std::set<const clang::CXXMethodDecl*> seen;
    record.forallBases([&](const clang::CXXRecordDecl* base) {
      for (const clang::CXXMethodDecl* method : base->methods()) {
        if (method->isStatic() || method->getAccess() == clang::AS_private) continue;
        if (!seen.insert(method->getCanonicalDecl()).second) continue;
        const std::optional<guarded_method> annotated = annotation_of(*method);
        if (!annotated || annotated->facts.http_endpoint || !reaches(record, *method)) continue;
        cls.methods.push_back(*annotated);
        if (!sm_.isInMainFile(sm_.getExpansionLoc(method->getLocation()))) add_include(cls, annotated->position.file);
      }
      return true;
    });
  }

  static void add_include(guarded_class& cls, const std::string& file) {
    std::pair<std::string, std::string> include{generated_header_of(file), file_name_of(file)};
    if (std::find(cls.includes.begin(), cls.includes.end(), include) == cls.includes.end())
      cls.includes.push_back(include);
  }

  // The annotation of `method`: this header's (validated), or an included header's.
  std::optional<guarded_method> annotation_of(const clang::CXXMethodDecl& method) const {
    if (auto it = specs_.find(method.getCanonicalDecl()); it != specs_.end())
      return guarded_method{it->second->facts, it->second->position, true};
    for (const clang::FunctionDecl* d : method.redecls())
      for (const found_attribute& attribute : included_)
        if (attribute.close_index != 0 && stands_before(sm_, expanded_, attribute.close_index, *d))
          return guarded_method{facts_of(method, context_), attribute.attribute.position, true};
    return std::nullopt;
  }

  // The classes from `record` up to the class of `method` along the path by which `record` derives
  // from it; empty when there is none, or it is ambiguous, or not public (the method is then not
  // callable on `record`).
  std::vector<const clang::CXXRecordDecl*> public_path(const clang::CXXRecordDecl& record,
                                                       const clang::CXXMethodDecl& method) const {
    clang::CXXBasePaths paths(/*FindAmbiguities=*/true, /*RecordPaths=*/true, /*DetectVirtual=*/false);
    if (!record.isDerivedFrom(method.getParent(), paths)) return {};
    if (paths.isAmbiguous(context_.getCanonicalType(context_.getRecordType(method.getParent())))) return {};
    if (paths.front().Access != clang::AS_public) return {};
    std::vector<const clang::CXXRecordDecl*> chain{&record};
    for (const clang::CXXBasePathElement& element : paths.front())
      chain.push_back(element.Base->getType()->getAsCXXRecordDecl());
    return chain;
  }

  // Whether `method` (of a base) is what `record` has under its name: not hidden on the way by a
  // declaration of the same name that does not override it, nor overridden by one annotated
  // itself (that one is guarded instead), nor by one the override rules refuse.
  bool reaches(const clang::CXXRecordDecl& record, const clang::CXXMethodDecl& method) {
    const std::vector<const clang::CXXRecordDecl*> chain = public_path(record, method);
    for (std::size_t k = 0; k + 1 < chain.size(); ++k) {
      const clang::DeclContextLookupResult found = chain[k]->lookup(method.getDeclName());
      if (found.empty()) continue;
      for (const clang::NamedDecl* d : found) {
        if (const auto* shadow = llvm::dyn_cast<clang::UsingShadowDecl>(d);
            shadow && shadow->getTargetDecl()->getCanonicalDecl() == method.getCanonicalDecl())
          return true;
        const auto* overrider = llvm::dyn_cast<clang::CXXMethodDecl>(d);
        if (overrider == nullptr || !overrides(*overrider, method)) continue;
        return guarded_through(record, *overrider, method);
      }
      return false;  // hidden by a declaration of the same name
    }
    return !chain.empty();
  }

  // Whether the wrapper of `record` guards the annotated `method` through `overrider`.
  bool guarded_through(const clang::CXXRecordDecl& record, const clang::CXXMethodDecl& overrider,
                       const clang::CXXMethodDecl& method) {
    if (annotation_of(overrider)) return false;
    const override_check check{context_, sm_, record, overrider, method, out_};
    return std::none_of(std::begin(override_rules), std::end(override_rules),
                        [&](const override_rule& rule) { return rule.check(check); });
  }

  const clang::ASTContext& context_;
  const SourceManager& sm_;
  llvm::ArrayRef<clang::syntax::Token> expanded_;
  std::vector<found_attribute> included_;
  const std::map<const clang::FunctionDecl*, const function_spec*>& specs_;
  std::vector<diagnostic>& out_;
};

}  // namespace

std::vector<guarded_class> find_guarded_classes(const clang::ASTContext& context,
                                                llvm::ArrayRef<clang::syntax::Token> expanded,
                                                std::vector<found_attribute> included,
                                                const std::map<const clang::FunctionDecl*, const function_spec*>& specs,
                                                const std::vector<clang::Decl*>& declarations,
                                                std::vector<diagnostic>& out) {
  guarded_class_finder finder(context, expanded, std::move(included), specs, out);
  std::vector<guarded_class> classes;
  for (const clang::Decl* d : declarations)
    if (const auto* record = llvm::dyn_cast<clang::CXXRecordDecl>(d))
      if (std::optional<guarded_class> cls = finder.find(*record)) classes.push_back(std::move(*cls));
  return classes;
}

}  // namespace idem::annotate
