// annotator/src/attribute_scan.hpp — finding [[idem::idempotent(...)]] in the token stream.
//
// Attributes are found in the preprocessed (expanded) tokens, so macros, `#if 0` and
// `[[using idem: ...]]` behave as the compiler sees them; their string literals are decoded by
// literal.hpp (no Clang).
#pragma once

#include <cstddef>
#include <vector>

#include <clang/AST/DeclBase.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Tooling/Syntax/Tokens.h>

#include "model.hpp"

namespace idem::annotate {

struct found_attribute {
  raw_attribute attribute;
  std::size_t close_index = 0;  // index of the final ']' in the expanded tokens
};

// Every idem attribute in the main file (`main_file`), or in every other file of the translation
// unit (whose mistakes their own generation reports: pass a vector that is then ignored).
std::vector<found_attribute> scan_attributes(const clang::SourceManager& sm,
                                             llvm::ArrayRef<clang::syntax::Token> tokens,
                                             std::vector<diagnostic>& out, bool main_file);

// Whether only declaration specifiers stand between the attribute ending at `close_index` and
// the name of `d`: no ';', '{' or '}' outside brackets.
bool stands_before(const clang::SourceManager& sm, llvm::ArrayRef<clang::syntax::Token> expanded,
                   std::size_t close_index, const clang::Decl& d);

}  // namespace idem::annotate
