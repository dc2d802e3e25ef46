// annotator/src/template_types.hpp — recognising specialisations of class templates (the Clang side):
// boost::asio::awaitable<T, Executor>, boost::beast::http::message<isRequest, Body, Fields>, by the
// qualified name of their template, through any alias.
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/Type.h>

namespace idem::annotate {

// The specialisation of the class template `name` (qualified) that `type` is, references,
// qualifiers and aliases aside; null if it is none.
inline const clang::ClassTemplateSpecializationDecl* specialization_of(clang::QualType type, llvm::StringRef name) {
  const auto* spec = llvm::dyn_cast_or_null<clang::ClassTemplateSpecializationDecl>(
      type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl());
  return spec != nullptr && spec->getQualifiedNameAsString() == name ? spec : nullptr;
}

// Whether the template argument `index` of `spec` is the default its template gives it.
inline bool is_default_argument(const clang::ClassTemplateSpecializationDecl& spec, unsigned index) {
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

}  // namespace idem::annotate
