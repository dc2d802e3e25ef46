// annotator/src/declaration_facts.cpp — see declaration_facts.hpp: the declarations of the main
// file, how types are named, and the facts about a function's shape and place (its kind, class,
// qualifiers, linkage, namespaces, parameters). What its return type says is return_facts.cpp's,
// whether it is an HTTP endpoint endpoint_facts.cpp's.
#include "declaration_facts.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>

#include <clang/AST/Attr.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/QualTypeNames.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Lex/Lexer.h>

#include "clang_diagnostics.hpp"
#include "endpoint_facts.hpp"
#include "return_facts.hpp"

namespace idem::annotate {

namespace {

// ---------------------------------------------------------------------------------------------
// Declarations of the main file, in source order.

class declaration_collector : public clang::RecursiveASTVisitor<declaration_collector> {
 public:
  explicit declaration_collector(const SourceManager& sm) : sm_(sm) {}

  bool TraverseDecl(clang::Decl* d) {
    if (d == nullptr) return true;
    if (d->isImplicit() && !llvm::isa<clang::TranslationUnitDecl>(d)) return true;
    if (!llvm::isa<clang::TranslationUnitDecl, clang::NamespaceDecl, clang::LinkageSpecDecl>(d)) {
      const SourceLocation loc = sm_.getExpansionLoc(d->getLocation());
      if (loc.isInvalid() || !sm_.isInMainFile(loc)) return true;
      // A template's pattern has the same location as the template itself; keep the pattern.
      if (!llvm::isa<clang::FunctionTemplateDecl, clang::ClassTemplateDecl, clang::VarTemplateDecl>(d))
        declarations.push_back(d);
    }
    return clang::RecursiveASTVisitor<declaration_collector>::TraverseDecl(d);
  }

  std::vector<clang::Decl*> declarations;

 private:
  const SourceManager& sm_;
};

// ---------------------------------------------------------------------------------------------
// A member function: its class, and what idem::guarded<C> needs to know about it there.

// The classes between the namespace and the function, joined by '_' ("Outer_Handler").
std::string class_path_of(const clang::CXXRecordDecl& record) {
  std::string path;
  for (const clang::DeclContext* dc = &record; dc != nullptr && dc->isRecord(); dc = dc->getParent()) {
    const std::string name = llvm::cast<clang::RecordDecl>(dc)->getNameAsString();
    path = path.empty() ? name : name + "_" + path;
  }
  return path;
}

// An overload of the same name in the class that is not public ("put(std::string)"), or empty.
std::string non_public_overload_of(const clang::CXXMethodDecl& method, const clang::ASTContext& context) {
  for (const clang::NamedDecl* other : method.getParent()->lookup(method.getDeclName())) {
    if (other->getCanonicalDecl() == method.getCanonicalDecl() || other->getAccess() == clang::AS_public) continue;
    std::string described = other->getNameAsString();
    if (const auto* f = llvm::dyn_cast<clang::FunctionDecl>(other->getUnderlyingDecl())) {
      described += "(";
      for (unsigned k = 0; k < f->getNumParams(); ++k)
        described += (k ? ", " : "") + type_name(f->getParamDecl(k)->getType(), context);
      described += ")";
    }
    return described;
  }
  return {};
}

void read_member_facts(const clang::CXXMethodDecl& method, const clang::ASTContext& context, function_facts& facts) {
  facts.kind = method.isStatic() ? function_kind::static_member : function_kind::member;
  const clang::CXXRecordDecl* record = method.getParent();
  facts.simple_class = record->getNameAsString();
  facts.qualified_class = record->getQualifiedNameAsString();
  facts.is_virtual = method.isVirtual();
  facts.is_pure = method.isPureVirtual();
  facts.is_const = method.isConst();
  facts.ref_qualifier = method.getRefQualifier() == clang::RQ_LValue   ? "&"
                        : method.getRefQualifier() == clang::RQ_RValue ? "&&"
                                                                       : "";
  facts.is_private = method.getAccess() == clang::AS_private;
  facts.is_protected = method.getAccess() == clang::AS_protected;
  facts.is_final = method.hasAttr<clang::FinalAttr>();
  facts.class_is_final = record->hasAttr<clang::FinalAttr>();
  facts.class_path = class_path_of(*record);
  if (!method.isStatic()) facts.non_public_overload = non_public_overload_of(method, context);
}

// ---------------------------------------------------------------------------------------------
// What kind of function it is, and where it is.

void read_kind_facts(const clang::FunctionDecl& fn, function_facts& facts) {
  if (const auto* proto = fn.getType()->getAs<clang::FunctionProtoType>()) facts.is_noexcept = proto->isNothrow();
  facts.is_template = fn.isTemplated() || fn.getDescribedFunctionTemplate() != nullptr ||
                      fn.isFunctionTemplateSpecialization();
  facts.is_special = llvm::isa<clang::CXXConstructorDecl, clang::CXXDestructorDecl, clang::CXXConversionDecl,
                               clang::CXXDeductionGuideDecl>(fn) ||
                     fn.isOverloadedOperator() || fn.getDeclName().getNameKind() != clang::DeclarationName::Identifier;
  facts.is_variadic = fn.isVariadic();
  facts.internal_linkage = !fn.isExternallyVisible();
}

void read_namespace_facts(const clang::FunctionDecl& fn, function_facts& facts) {
  std::tie(facts.namespace_open, facts.namespace_close) = enclosing_namespaces(fn);
  for (const clang::DeclContext* dc = fn.getDeclContext(); dc != nullptr; dc = dc->getParent())
    if (const auto* ns = llvm::dyn_cast<clang::NamespaceDecl>(dc); ns && !ns->isAnonymousNamespace())
      facts.namespace_name = ns->getNameAsString() + (facts.namespace_name.empty() ? "" : "::") + facts.namespace_name;
}

// Another function of the same name in the same scope.
bool is_overloaded(const clang::FunctionDecl& fn) {
  const clang::DeclContext* scope = fn.getDeclContext()->getRedeclContext();
  unsigned functions = 0;
  for (const clang::NamedDecl* other : scope->lookup(fn.getDeclName())) {
    if (llvm::isa<clang::FunctionDecl, clang::FunctionTemplateDecl>(other)) ++functions;
  }
  return functions > 1;
}

// ---------------------------------------------------------------------------------------------
// Parameters.

// A private member that `e` uses ("Account::secret"), or empty.
std::string private_member_used_by(const clang::Expr& e) {
  struct private_finder : clang::RecursiveASTVisitor<private_finder> {
    std::string found;
    void check(const clang::ValueDecl* d) {
      if (found.empty() && d != nullptr && d->getDeclContext()->isRecord() && d->getAccess() == clang::AS_private)
        found = d->getQualifiedNameAsString();
    }
    bool VisitDeclRefExpr(clang::DeclRefExpr* r) {
      check(r->getDecl());
      return true;
    }
    bool VisitMemberExpr(clang::MemberExpr* m) {
      check(m->getMemberDecl());
      return true;
    }
  } finder;
  finder.TraverseStmt(const_cast<clang::Expr*>(&e));
  return finder.found;
}

// The default argument as written, where, what it uses, and what a function returning it returns.
void read_default_argument(const clang::ParmVarDecl& param, const clang::ASTContext& context, parameter& p) {
  const SourceManager& sm = context.getSourceManager();
  const clang::CharSourceRange range = sm.getExpansionRange(param.getDefaultArgRange());
  p.default_argument =
      clang::Lexer::getSourceText(clang::CharSourceRange::getTokenRange(range.getAsRange()), sm, context.getLangOpts())
          .str();
  p.default_position = position_of(sm, range.getBegin());
  p.default_private_member = private_member_used_by(*param.getDefaultArg());
  const clang::QualType type = param.getType();
  const bool by_reference = type->isLValueReferenceType() && !type.getNonReferenceType().isConstQualified();
  p.default_type =
      by_reference ? p.code_type : type_name(type.getNonReferenceType().getUnqualifiedType(), context, true);
}

parameter parameter_of(const clang::ParmVarDecl& param, const clang::ASTContext& context) {
  parameter p;
  const clang::QualType type = param.getType();
  p.type = type_name(type, context);
  p.name = param.getNameAsString();
  p.position = spelled_position(context.getSourceManager(), param.getLocation());
  clang::QualType key_type = type;
  if (!type->isLValueReferenceType()) key_type = context.getLValueReferenceType(type.getNonReferenceType().withConst());
  p.key_type = type_name(key_type, context);
  p.code_type = type_name(type, context, true);
  p.code_key_type = type_name(key_type, context, true);
  if (param.hasDefaultArg() && !param.hasUnparsedDefaultArg() && !param.hasUninstantiatedDefaultArg())
    read_default_argument(param, context, p);
  return p;
}

// "void (::shop::OrderListener::*)(const ::shop::OrderPlaced&) const", as generated code spells it.
std::string pointer_type_of(const function_facts& facts) {
  std::string parameter_types;
  for (const parameter& p : facts.parameters) parameter_types += (parameter_types.empty() ? "" : ", ") + p.code_type;
  std::string qualifiers;
  if (facts.is_const) qualifiers += " const";
  if (!facts.ref_qualifier.empty()) qualifiers += " " + facts.ref_qualifier;
  if (facts.is_noexcept) qualifiers += " noexcept";
  return facts.code_return_type + " (" +
         (facts.kind == function_kind::member ? "::" + facts.qualified_class + "::*" : std::string("*")) + ")(" +
         parameter_types + ")" + qualifiers;
}

}  // namespace

std::vector<clang::Decl*> main_file_declarations(clang::ASTContext& context) {
  const SourceManager& sm = context.getSourceManager();
  declaration_collector collector(sm);
  collector.TraverseDecl(context.getTranslationUnitDecl());
  std::vector<clang::Decl*> declarations = std::move(collector.declarations);
  std::sort(declarations.begin(), declarations.end(), [&](const clang::Decl* a, const clang::Decl* b) {
    return sm.isBeforeInTranslationUnit(sm.getExpansionLoc(a->getLocation()), sm.getExpansionLoc(b->getLocation()));
  });
  return declarations;
}

// ---------------------------------------------------------------------------------------------
// Facts about a function.

clang::PrintingPolicy printing_policy(const clang::ASTContext& context) {
  clang::PrintingPolicy policy(context.getLangOpts());
  policy.SuppressUnwrittenScope = true;
  policy.SuppressTagKeyword = true;
  policy.Bool = true;
  return policy;
}

// `global` spells it from the global namespace ("::shop::Receipt"), as generated code must.
std::string type_name(clang::QualType type, const clang::ASTContext& context, bool global) {
  std::string name = clang::TypeName::getFullyQualifiedName(type, context, printing_policy(context), global);
  // "const T &" -> "const T&", the way idem's own code spells it.
  for (const char* suffix : {" &&", " &", " *"})
    if (llvm::StringRef(name).ends_with(suffix)) {
      name.erase(name.size() - std::strlen(suffix), 1);
      break;
    }
  return name;
}

function_facts facts_of(const clang::FunctionDecl& fn, const clang::ASTContext& context) {
  function_facts facts;
  facts.qualified_name = fn.getQualifiedNameAsString();
  facts.name = fn.getNameAsString();
  if (const auto* method = llvm::dyn_cast<clang::CXXMethodDecl>(&fn)) read_member_facts(*method, context, facts);
  read_return_facts(fn, context, facts);
  read_kind_facts(fn, facts);
  if (const std::optional<http_server> server = http_endpoint_server(fn, facts.http_problem)) {
    facts.http_endpoint = true;
    facts.server = *server;
  }
  read_namespace_facts(fn, facts);
  for (const clang::ParmVarDecl* param : fn.parameters()) facts.parameters.push_back(parameter_of(*param, context));
  facts.pointer_type = pointer_type_of(facts);
  if (!facts.is_special) facts.is_overloaded = is_overloaded(fn);
  return facts;
}

// "namespace a { inline namespace b {" for the namespaces enclosing `fn`, and the closing braces.
std::pair<std::string, std::string> enclosing_namespaces(const clang::FunctionDecl& fn) {
  std::vector<const clang::NamespaceDecl*> chain;
  for (const clang::DeclContext* dc = fn.getDeclContext(); dc != nullptr; dc = dc->getParent())
    if (const auto* ns = llvm::dyn_cast<clang::NamespaceDecl>(dc)) chain.push_back(ns);
  std::string open;
  std::string close;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    open += std::string((*it)->isInline() ? "inline " : "") + "namespace " +
            ((*it)->isAnonymousNamespace() ? std::string() : (*it)->getNameAsString() + " ") + "{ ";
    close += "} ";
  }
  return {open, close};
}

}  // namespace idem::annotate
