// annotator/src/guarded_classes.hpp — every idem::guarded<C> of a header, read from Clang's AST: per
// class, the annotated methods it has, its own and inherited ones, and what its wrapper cannot
// guard (an un-annotated override that is final, or has other default arguments).
#pragma once

#include <map>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/Tooling/Syntax/Tokens.h>

#include "attribute_scan.hpp"
#include "model.hpp"

namespace idem::annotate {

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
