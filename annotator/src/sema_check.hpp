// annotator/src/sema_check.hpp — key expressions and codecs type-checked by Clang's Sema.
//
// After the header, the same parser continues into an in-memory "check" buffer: per function, in
// its namespace, a function with its parameters returning the key expression, an alias for the
// codec, and constexpr bools for idem::key_value and idem::codec_for. Clang's own errors there are
// mapped back onto the attribute's string literals (clang_diagnostics.hpp); what Sema cannot say
// by itself (a key using globals, a key or codec of the wrong kind) is judged here.
#pragma once

#include <vector>

#include <clang/AST/Decl.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Parse/Parser.h>

#include "clang_diagnostics.hpp"
#include "model.hpp"

namespace idem::annotate {

// `specs[i]` is the (possibly partial) spec of `functions[i]`; diagnostics go to `out` (Clang's
// through `consumer`).
void check_with_sema(clang::CompilerInstance& ci, clang::Parser& parser, collecting_consumer& consumer,
                     const std::vector<function_spec>& specs, const std::vector<const clang::FunctionDecl*>& functions,
                     std::vector<diagnostic>& out);

}  // namespace idem::annotate
