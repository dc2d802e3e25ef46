// annotator/src/return_facts.cpp — see return_facts.hpp.
#include "return_facts.hpp"

#include <optional>
#include <string>

#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>

#include "declaration_facts.hpp"
#include "template_types.hpp"

namespace idem::annotate {

namespace {

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

}  // namespace

void read_return_facts(const clang::FunctionDecl& fn, const clang::ASTContext& context, function_facts& facts) {
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
}

}  // namespace idem::annotate
