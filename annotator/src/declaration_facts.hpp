// annotator/src/declaration_facts.hpp — what the validator and the emitter need to know about
// declarations, read from Clang's AST: the main file's declarations in source order, and the facts
// about a function (model.hpp's function_facts; its return type's in return_facts.cpp, whether it
// is an HTTP endpoint in endpoint_facts.cpp). Every idem::guarded<C> is guarded_classes.hpp's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/PrettyPrinter.h>

#include "model.hpp"

namespace idem::annotate {

// The declarations of the main file (no implicit ones, templates by their pattern), in source order.
std::vector<clang::Decl*> main_file_declarations(clang::ASTContext& context);

clang::PrintingPolicy printing_policy(const clang::ASTContext& context);

// The fully qualified name of `type` ("const T&" spaced the way idem spells it); `global` spells
// it from the global namespace ("::shop::Receipt"), as generated code must.
std::string type_name(clang::QualType type, const clang::ASTContext& context, bool global = false);

function_facts facts_of(const clang::FunctionDecl& fn, const clang::ASTContext& context);

// "namespace a { inline namespace b { " for the namespaces enclosing `fn`, and the closing braces.
std::pair<std::string, std::string> enclosing_namespaces(const clang::FunctionDecl& fn);

}  // namespace idem::annotate
