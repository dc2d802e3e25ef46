// annotator/src/frontend.hpp — the Clang side of idem-annotate, behind a Clang-free interface.
//
// analyze() parses one header with Clang 19, finds every idem::idempotent attribute in the
// preprocessed token stream, attaches it to the function declaration that follows, validates it
// (validator.hpp) and type-checks its key expression and codec with Sema in the same compiler
// instance. Only this translation unit includes Clang headers.
#pragma once

#include <string>
#include <vector>

#include "model.hpp"

namespace idem::annotate {

struct analysis_request {
  std::string source;                       // the header, as the user's build names it
  std::vector<std::string> compiler_args;  // -I, -D, -std=... from the target
  std::string resource_dir;                 // Clang's builtin headers (stddef.h, ...)
  std::string idem_include_dir;             // where <idem/invoke.hpp> is
  bool check_keys = true;                   // Sema checks of key expressions and codecs
};

struct analysis_result {
  std::vector<function_spec> specs;       // valid annotations, in source order
  std::vector<guarded_class> classes;     // every idem::guarded<C> to generate, inherited methods included
  std::vector<diagnostic> diagnostics;    // ours and Clang's, in the order they arose
  std::vector<std::string> dependencies;  // every file the parse read
  bool ok = false;                        // no error at all
};

analysis_result analyze(const analysis_request& request);

}  // namespace idem::annotate
