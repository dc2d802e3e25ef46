// annotator/src/declaration_facts.hpp — what the validator and the emitter need to know about
// declarations, read from Clang's AST: the main file's declarations in source order, the facts
// about a function (model.hpp's function_facts), and every idem::guarded<C> with the annotated
// methods C has, inherited ones included.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/PrettyPrinter.h>
#include <clang/Tooling/Syntax/Tokens.h>

#include "attribute_scan.hpp"
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

// Every idem::guarded<C> of the header: per class among `declarations`, the annotated methods it
// has, its own (`specs`: this header's valid annotations by canonical declaration) and inherited
// ones (annotated in this header or, per `included`, in an included one). What cannot be guarded
// (a final or differently-defaulted override) is reported into `out`.
std::vector<guarded_class> find_guarded_classes(const clang::ASTContext& context,
                                                llvm::ArrayRef<clang::syntax::Token> expanded,
                                                std::vector<found_attribute> included,
                                                const std::map<const clang::FunctionDecl*, const function_spec*>& specs,
                                                const std::vector<clang::Decl*>& declarations,
                                                std::vector<diagnostic>& out);

}  // namespace idem::annotate
