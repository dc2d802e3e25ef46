// annotator/src/declaration_facts.cpp — see declaration_facts.hpp.
#include "declaration_facts.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <clang/AST/CXXInheritance.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/QualTypeNames.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Lex/Lexer.h>

#include "clang_diagnostics.hpp"

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

// The specialisation of the class template `name` (qualified) that `type` is, references,
// qualifiers and aliases aside; null if it is none.
const clang::ClassTemplateSpecializationDecl* specialization_of(clang::QualType type, llvm::StringRef name) {
  const auto* spec = llvm::dyn_cast_or_null<clang::ClassTemplateSpecializationDecl>(
      type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl());
  return spec != nullptr && spec->getQualifiedNameAsString() == name ? spec : nullptr;
}

// Whether the template argument `index` of `spec` is the default its template gives it.
bool is_default_argument(const clang::ClassTemplateSpecializationDecl& spec, unsigned index) {
  const clang::TemplateArgumentList& args = spec.getTemplateArgs();
  const clang::TemplateParameterList* params = spec.getSpecializedTemplate()->getTemplateParameters();
  if (index >= args.size() || index >= params->size() || args[index].getKind() != clang::TemplateArgument::Type)
    return false;
  const auto* param = llvm::dyn_cast<clang::TemplateTypeParmDecl>(params->getParam(index));
  if (param == nullptr || !param->hasDefaultArgument()) return false;
  const clang::TemplateArgument& fallback = param->getDefaultArgument().getArgument();
  return fallback.getKind() == clang::TemplateArgument::Type &&
         spec.getASTContext().hasSameType(fallback.getAsType(), args[index].getAsType());
}

// T when `type` is boost::asio::awaitable<T, Executor>.
std::optional<clang::QualType> asio_awaitable_value(clang::QualType type) {
  const clang::ClassTemplateSpecializationDecl* spec = specialization_of(type, "boost::asio::awaitable");
  if (spec == nullptr) return std::nullopt;
  const clang::TemplateArgumentList& args = spec->getTemplateArgs();
  if (args.size() < 1 || args[0].getKind() != clang::TemplateArgument::Type) return std::nullopt;
  return args[0].getAsType();
}

// Whether `type` is something asynchronous that is not a plain value: a coroutine's return type
// (it has a promise_type), an awaitable (await_ready, operator co_await) or a future.
bool is_unknown_async(clang::QualType type) {
  const clang::CXXRecordDecl* record = type.getCanonicalType()->getAsCXXRecordDecl();
  if (record == nullptr) return false;
  const std::string name = record->getQualifiedNameAsString();
  if (name == "std::future" || name == "std::shared_future") return true;
  // A specialisation a declaration names is not instantiated: look at its template's members.
  if (const auto* spec = llvm::dyn_cast<clang::ClassTemplateSpecializationDecl>(record);
      spec != nullptr && !spec->hasDefinition())
    record = spec->getSpecializedTemplate()->getTemplatedDecl();
  if (record == nullptr || !record->hasDefinition()) return false;
  clang::ASTContext& context = record->getASTContext();
  for (const char* member : {"promise_type", "await_ready"})
    if (!record->lookup(&context.Idents.get(member)).empty()) return true;
  return !record->lookup(context.DeclarationNames.getCXXOperatorName(clang::OO_Coawait)).empty();
}

// Judges a function that takes a request or response of some server: an endpoint when it has
// the `shape` that server's adapter calls and is a non-static member function (the adapter calls
// it on an object); otherwise a near miss, refused by the validator (`problem`) rather than guarded
// as an ordinary function: it was almost certainly meant as an endpoint, and an ordinary guard
// would key it by an expression and store no response.
bool endpoint_or_problem(const clang::FunctionDecl& fn, bool shape, std::string_view route,
                         std::string_view near_miss, std::string& problem) {
  const auto* method = llvm::dyn_cast<clang::CXXMethodDecl>(&fn);
  if (shape && method != nullptr && !method->isStatic()) return true;
  const std::string name = "'" + fn.getQualifiedNameAsString() + "'";
  if (shape)
    problem = name + " has the signature of an HTTP endpoint but is not a non-static member function: " +
              std::string(route) + " calls an endpoint on an object; make it a member function";
  else
    problem = name + std::string(near_miss) + ", or give it what its key needs instead of the request";
  return false;
}

// Whether `type`, references and qualifiers aside, is the class httplib::<name> (through any
// alias: the canonical declaration's qualified name decides, not the spelling).
bool is_httplib_class(clang::QualType type, llvm::StringRef name) {
  const clang::CXXRecordDecl* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  return record != nullptr && record->getQualifiedNameAsString() == ("httplib::" + name).str();
}

// `const httplib::Request&` exactly (not volatile, not by value, not an rvalue reference).
bool is_httplib_request_parameter(clang::QualType type) {
  if (!type->isLValueReferenceType()) return false;
  const clang::QualType pointee = type.getNonReferenceType();
  return pointee.isConstQualified() && !pointee.isVolatileQualified() && is_httplib_class(pointee, "Request");
}

// `httplib::Response&` exactly (not const, not volatile).
bool is_httplib_response_parameter(clang::QualType type) {
  if (!type->isLValueReferenceType()) return false;
  const clang::QualType pointee = type.getNonReferenceType();
  return !pointee.isConstQualified() && !pointee.isVolatileQualified() && is_httplib_class(pointee, "Response");
}

// A cpp-httplib endpoint: `void m(const httplib::Request&, httplib::Response&)` on an object,
// whatever the parameters' names (the validator requires void). False without `problem` when the
// function takes no httplib::Request or httplib::Response.
bool is_httplib_endpoint(const clang::FunctionDecl& fn, std::string& problem) {
  bool mentions_httplib = false;
  for (const clang::ParmVarDecl* param : fn.parameters())
    mentions_httplib = mentions_httplib || is_httplib_class(param->getType(), "Request") ||
                       is_httplib_class(param->getType(), "Response");
  if (!mentions_httplib) return false;
  const bool shape = fn.getNumParams() == 2 && is_httplib_request_parameter(fn.getParamDecl(0)->getType()) &&
                     is_httplib_response_parameter(fn.getParamDecl(1)->getType());
  return endpoint_or_problem(fn, shape, "idem::http::route<&C::m>",
                             " takes an httplib::Request or httplib::Response but is not an HTTP endpoint, which is "
                             "a non-static member function with exactly the parameters (const httplib::Request&, "
                             "httplib::Response&); give it these parameters",
                             problem);
}

// A Beast request or response: boost::beast::http::message<isRequest, Body, Fields>.
const clang::ClassTemplateSpecializationDecl* beast_message(clang::QualType type) {
  return specialization_of(type, "boost::beast::http::message");
}

// Whether `message` is a request (or a response) as idem::http::beast's router reads and writes
// them: http::string_body and Beast's default fields (request_type, response_type).
bool is_beast_string_message(const clang::ClassTemplateSpecializationDecl& message, bool request) {
  const clang::TemplateArgumentList& args = message.getTemplateArgs();
  if (args.size() != 3 || args[0].getKind() != clang::TemplateArgument::Integral ||
      args[0].getAsIntegral().getBoolValue() != request || args[1].getKind() != clang::TemplateArgument::Type)
    return false;
  // Compared with the alias http::string_body, declared in message's namespace.
  const clang::DeclContext* beast_http = message.getSpecializedTemplate()->getDeclContext();
  clang::ASTContext& context = message.getASTContext();
  bool string_body = false;
  for (const clang::NamedDecl* found : beast_http->lookup(&context.Idents.get("string_body")))
    if (const auto* alias = llvm::dyn_cast<clang::TypedefNameDecl>(found))
      string_body = string_body || context.hasSameType(alias->getUnderlyingType(), args[1].getAsType());
  return string_body && is_default_argument(message, 2);
}

// A Boost.Beast endpoint: the coroutine `boost::asio::awaitable<response_type> m(const
// request_type&)` on an object (idem::http::beast's request_type and response_type: string
// bodies, Beast's default fields, Asio's default executor). False without `problem` when the
// function takes no Beast message.
bool is_beast_endpoint(const clang::FunctionDecl& fn, std::string& problem) {
  bool mentions_beast = false;
  for (const clang::ParmVarDecl* param : fn.parameters())
    mentions_beast = mentions_beast || beast_message(param->getType()) != nullptr;
  if (!mentions_beast) return false;
  bool shape = false;
  if (fn.getNumParams() == 1) {
    const clang::QualType param = fn.getParamDecl(0)->getType();
    const clang::QualType pointee = param.getNonReferenceType();
    const clang::ClassTemplateSpecializationDecl* request = beast_message(param);
    const clang::ClassTemplateSpecializationDecl* awaitable =
        specialization_of(fn.getReturnType(), "boost::asio::awaitable");
    const clang::ClassTemplateSpecializationDecl* response =
        awaitable != nullptr ? beast_message(awaitable->getTemplateArgs()[0].getAsType()) : nullptr;
    shape = param->isLValueReferenceType() && pointee.isConstQualified() && !pointee.isVolatileQualified() &&
            request != nullptr && is_beast_string_message(*request, true) && response != nullptr &&
            !fn.getReturnType()->isReferenceType() && is_beast_string_message(*response, false) &&
            is_default_argument(*awaitable, 1);
  }
  return endpoint_or_problem(fn, shape, "idem::http::beast::route<&C::m>",
                             " takes a Boost.Beast request or response but is not an HTTP endpoint, which is a "
                             "non-static member function with exactly the signature boost::asio::awaitable<"
                             "idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this "
                             "signature",
                             problem);
}

// The server an HTTP endpoint is written for, whose key comes from the Idempotency-Key header, or
// none: see is_httplib_endpoint and is_beast_endpoint.
std::optional<http_server> http_endpoint_server(const clang::FunctionDecl& fn, std::string& problem) {
  if (is_httplib_endpoint(fn, problem)) return http_server::httplib;
  if (problem.empty() && is_beast_endpoint(fn, problem)) return http_server::beast;
  return std::nullopt;
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
  const auto* method = llvm::dyn_cast<clang::CXXMethodDecl>(&fn);
  if (method != nullptr) {
    facts.kind = method->isStatic() ? function_kind::static_member : function_kind::member;
    const clang::CXXRecordDecl* record = method->getParent();
    facts.simple_class = record->getNameAsString();
    facts.qualified_class = record->getQualifiedNameAsString();
    facts.is_virtual = method->isVirtual();
    facts.is_pure = method->isPureVirtual();
    facts.is_const = method->isConst();
    facts.ref_qualifier = method->getRefQualifier() == clang::RQ_LValue   ? "&"
                          : method->getRefQualifier() == clang::RQ_RValue ? "&&"
                                                                          : "";
    facts.is_private = method->getAccess() == clang::AS_private;
    facts.is_protected = method->getAccess() == clang::AS_protected;
    facts.is_final = method->hasAttr<clang::FinalAttr>();
    facts.class_is_final = record->hasAttr<clang::FinalAttr>();
    for (const clang::DeclContext* dc = record; dc != nullptr && dc->isRecord(); dc = dc->getParent()) {
      const std::string name = llvm::cast<clang::RecordDecl>(dc)->getNameAsString();
      facts.class_path = facts.class_path.empty() ? name : name + "_" + facts.class_path;
    }
    if (!method->isStatic())
      for (const clang::NamedDecl* other : record->lookup(fn.getDeclName())) {
        if (other->getCanonicalDecl() == fn.getCanonicalDecl() || other->getAccess() == clang::AS_public) continue;
        std::string described = other->getNameAsString();
        if (const auto* f = llvm::dyn_cast<clang::FunctionDecl>(other->getUnderlyingDecl())) {
          described += "(";
          for (unsigned k = 0; k < f->getNumParams(); ++k)
            described += (k ? ", " : "") + type_name(f->getParamDecl(k)->getType(), context);
          described += ")";
        }
        facts.non_public_overload = described;
        break;
      }
  }
  const clang::QualType result = fn.getReturnType();
  facts.return_type = type_name(result, context);
  facts.code_return_type = type_name(result, context, true);
  facts.returns_void = result->isVoidType();
  facts.returns_reference = result->isReferenceType();
  if (std::optional<clang::QualType> value = asio_awaitable_value(result)) {
    facts.is_async = true;
    facts.value_type = type_name(*value, context);
    facts.code_value_type = type_name(*value, context, true);
    facts.returns_void = (*value)->isVoidType();
  } else if (is_unknown_async(result)) {
    facts.unknown_async_type = facts.return_type;
  }
  if (const auto* proto = fn.getType()->getAs<clang::FunctionProtoType>()) facts.is_noexcept = proto->isNothrow();
  facts.is_template = fn.isTemplated() || fn.getDescribedFunctionTemplate() != nullptr ||
                      fn.isFunctionTemplateSpecialization();
  facts.is_special = llvm::isa<clang::CXXConstructorDecl, clang::CXXDestructorDecl, clang::CXXConversionDecl,
                               clang::CXXDeductionGuideDecl>(fn) ||
                     fn.isOverloadedOperator() || fn.getDeclName().getNameKind() != clang::DeclarationName::Identifier;
  facts.is_variadic = fn.isVariadic();
  facts.internal_linkage = !fn.isExternallyVisible();
  if (const std::optional<http_server> server = http_endpoint_server(fn, facts.http_problem)) {
    facts.http_endpoint = true;
    facts.server = *server;
  }
  std::tie(facts.namespace_open, facts.namespace_close) = enclosing_namespaces(fn);
  for (const clang::DeclContext* dc = fn.getDeclContext(); dc != nullptr; dc = dc->getParent())
    if (const auto* ns = llvm::dyn_cast<clang::NamespaceDecl>(dc); ns && !ns->isAnonymousNamespace())
      facts.namespace_name = ns->getNameAsString() + (facts.namespace_name.empty() ? "" : "::") + facts.namespace_name;

  std::string parameter_types;
  for (const clang::ParmVarDecl* param : fn.parameters()) {
    parameter p;
    const clang::QualType type = param->getType();
    p.type = type_name(type, context);
    p.name = param->getNameAsString();
    p.position = spelled_position(context.getSourceManager(), param->getLocation());
    clang::QualType key_type = type;
    if (!type->isLValueReferenceType())
      key_type = context.getLValueReferenceType(type.getNonReferenceType().withConst());
    p.key_type = type_name(key_type, context);
    p.code_type = type_name(type, context, true);
    p.code_key_type = type_name(key_type, context, true);
    if (param->hasDefaultArg() && !param->hasUnparsedDefaultArg() && !param->hasUninstantiatedDefaultArg()) {
      const SourceManager& sm = context.getSourceManager();
      const clang::CharSourceRange range = sm.getExpansionRange(param->getDefaultArgRange());
      p.default_argument =
          clang::Lexer::getSourceText(clang::CharSourceRange::getTokenRange(range.getAsRange()), sm, context.getLangOpts())
              .str();
      p.default_position = position_of(sm, range.getBegin());
      struct private_finder : clang::RecursiveASTVisitor<private_finder> {
        std::string found;
        void check(const clang::ValueDecl* d) {
          if (found.empty() && d != nullptr && d->getDeclContext()->isRecord() && d->getAccess() == clang::AS_private)
            found = d->getQualifiedNameAsString();
        }
        bool VisitDeclRefExpr(clang::DeclRefExpr* e) {
          check(e->getDecl());
          return true;
        }
        bool VisitMemberExpr(clang::MemberExpr* e) {
          check(e->getMemberDecl());
          return true;
        }
      } finder;
      finder.TraverseStmt(const_cast<clang::Expr*>(param->getDefaultArg()));
      p.default_private_member = finder.found;
      const bool by_reference = type->isLValueReferenceType() && !type.getNonReferenceType().isConstQualified();
      p.default_type =
          by_reference ? p.code_type : type_name(type.getNonReferenceType().getUnqualifiedType(), context, true);
    }
    parameter_types += (parameter_types.empty() ? "" : ", ") + p.code_type;
    facts.parameters.push_back(std::move(p));
  }
  std::string qualifiers;
  if (facts.is_const) qualifiers += " const";
  if (!facts.ref_qualifier.empty()) qualifiers += " " + facts.ref_qualifier;
  if (facts.is_noexcept) qualifiers += " noexcept";
  facts.pointer_type = facts.code_return_type + " (" +
                       (facts.kind == function_kind::member ? "::" + facts.qualified_class + "::*" : std::string("*")) +
                       ")(" +
                       parameter_types + ")" + qualifiers;

  // Overloaded: another function of the same name in the same scope.
  if (!facts.is_special) {
    const clang::DeclContext* scope = fn.getDeclContext()->getRedeclContext();
    unsigned functions = 0;
    for (const clang::NamedDecl* other : scope->lookup(fn.getDeclName())) {
      if (llvm::isa<clang::FunctionDecl, clang::FunctionTemplateDecl>(other)) ++functions;
    }
    facts.is_overloaded = functions > 1;
  }
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
    if (!record.isThisDeclarationADefinition() || record.isLambda() || record.isUnion() ||
        record.getIdentifier() == nullptr || record.isTemplated() ||
        llvm::isa<clang::ClassTemplateSpecializationDecl>(record) || record.isLocalClass() ||
        !record.isExternallyVisible() || record.hasAttr<clang::FinalAttr>())
      return std::nullopt;
    for (const clang::DeclContext* dc = &record; dc != nullptr && dc->isRecord(); dc = dc->getParent())
      if (llvm::cast<clang::Decl>(dc)->getAccess() == clang::AS_private ||
          llvm::cast<clang::Decl>(dc)->getAccess() == clang::AS_protected)
        return std::nullopt;  // nobody outside could name idem::guarded<C>
    guarded_class cls;
    cls.name = record.getQualifiedNameAsString();
    cls.code_name = "::" + cls.name;
    for (const clang::CXXMethodDecl* method : record.methods())
      // An endpoint is called by the server through idem::http::route, not through guarded<C>.
      if (auto it = specs_.find(method->getCanonicalDecl());
          it != specs_.end() && !method->isStatic() && !it->second->facts.http_endpoint)
        cls.methods.push_back({it->second->facts, it->second->position, false});
    std::set<const clang::CXXMethodDecl*> seen;
    record.forallBases([&](const clang::CXXRecordDecl* base) {
      for (const clang::CXXMethodDecl* method : base->methods()) {
        if (method->isStatic() || method->getAccess() == clang::AS_private) continue;
        if (!seen.insert(method->getCanonicalDecl()).second) continue;
        const std::optional<guarded_method> annotated = annotation_of(*method);
        if (!annotated || annotated->facts.http_endpoint || !reaches(record, *method)) continue;
        cls.methods.push_back(*annotated);
        const std::string& file = annotated->position.file;
        if (!sm_.isInMainFile(sm_.getExpansionLoc(method->getLocation()))) {
          std::pair<std::string, std::string> include{generated_header_of(file), file_name_of(file)};
          if (std::find(cls.includes.begin(), cls.includes.end(), include) == cls.includes.end())
            cls.includes.push_back(include);
        }
      }
      return true;
    });
    if (cls.methods.empty()) return std::nullopt;
    return cls;
  }

 private:
  // The annotation of `method`: this header's (validated), or an included header's.
  std::optional<guarded_method> annotation_of(const clang::CXXMethodDecl& method) {
    if (auto it = specs_.find(method.getCanonicalDecl()); it != specs_.end())
      return guarded_method{it->second->facts, it->second->position, true};
    for (const clang::FunctionDecl* d : method.redecls())
      for (const found_attribute& attribute : included_)
        if (attribute.close_index != 0 && stands_before(sm_, expanded_, attribute.close_index, *d))
          return guarded_method{facts_of(method, context_), attribute.attribute.position, true};
    return std::nullopt;
  }

  // Whether `method` (of a base) is what `record` has under its name: not hidden on the way by a
  // declaration of the same name that does not override it, nor overridden by one annotated
  // itself (that one is guarded instead). A final overrider cannot be guarded: an error there.
  bool reaches(const clang::CXXRecordDecl& record, const clang::CXXMethodDecl& method) {
    clang::CXXBasePaths paths(/*FindAmbiguities=*/true, /*RecordPaths=*/true, /*DetectVirtual=*/false);
    if (!record.isDerivedFrom(method.getParent(), paths)) return false;
    if (paths.isAmbiguous(context_.getCanonicalType(context_.getRecordType(method.getParent())))) return false;
    if (paths.front().Access != clang::AS_public) return false;  // private or protected base: not callable on C
    std::vector<const clang::CXXRecordDecl*> chain{&record};
    for (const clang::CXXBasePathElement& element : paths.front())
      chain.push_back(element.Base->getType()->getAsCXXRecordDecl());
    for (std::size_t k = 0; k + 1 < chain.size(); ++k) {
      const clang::DeclContextLookupResult found = chain[k]->lookup(method.getDeclName());
      if (found.empty()) continue;
      for (const clang::NamedDecl* d : found) {
        if (const auto* shadow = llvm::dyn_cast<clang::UsingShadowDecl>(d);
            shadow && shadow->getTargetDecl()->getCanonicalDecl() == method.getCanonicalDecl())
          return true;
        const auto* overrider = llvm::dyn_cast<clang::CXXMethodDecl>(d);
        if (overrider == nullptr || !overrides(*overrider, method)) continue;
        if (annotation_of(*overrider)) return false;
        if (overrider->hasAttr<clang::FinalAttr>()) {
          out_.push_back({severity::error, position_of(sm_, sm_.getExpansionLoc(overrider->getLocation())),
                          "'" + overrider->getQualifiedNameAsString() + "' is final, so idem::guarded<" +
                              record.getNameAsString() + "> cannot guard the annotated '" +
                              method.getQualifiedNameAsString() + "' it overrides; remove final, or make " +
                              record.getNameAsString() + " final (then only idem::invoke guards it)"});
          return false;
        }
        // Calls on C use the overrider's default arguments; idem::guarded<C> passes the policy's.
        const function_facts mine = facts_of(*overrider, context_);
        const function_facts theirs = facts_of(method, context_);
        for (std::size_t p = 0; p < mine.parameters.size() && p < theirs.parameters.size(); ++p)
          if (mine.parameters[p].default_argument != theirs.parameters[p].default_argument) {
            out_.push_back({severity::error, position_of(sm_, sm_.getExpansionLoc(overrider->getLocation())),
                            "'" + overrider->getQualifiedNameAsString() + "' overrides the annotated '" +
                                method.getQualifiedNameAsString() +
                                "' with other default arguments, which idem::guarded<" + record.getNameAsString() +
                                "> cannot keep; give both the same default arguments, or annotate the override"});
            return false;
          }
        return true;
      }
      return false;  // hidden by a declaration of the same name
    }
    return true;
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
