// annotator/src/emitter.hpp — the generated header, source and manifest, from validated specs.
//
// Pure text generation; no Clang. The output is formatted by construction (two-space indent,
// lines kept short) and compiles warning-free under -Wall -Wextra -Wpedantic -Wshadow -Werror.
#pragma once

#include <string>
#include <vector>

#include "model.hpp"

namespace idem::annotate {

struct emit_options {
  std::string source_path;     // the annotated header as given to the tool (#line, file, manifest)
  std::string include_as;      // how the generated header includes it, e.g. "order_listener.hpp"
  std::string header_name;     // the generated header's file name, for the .cpp's #include and #line
  std::string generator = "idem-annotate";
};

struct generated_files {
  std::string header;
  std::string source;
  std::string manifest;  // JSON
};

// The expression naming the function in a template argument: `&C::m`, or with a static_cast to
// its exact pointer type when the name is overloaded.
std::string function_pointer_expression(const function_facts& facts);

// The guarded classes of `specs` alone: each class with annotated non-static methods, its own
// methods only (the frontend adds inherited ones, which need Clang to find).
std::vector<guarded_class> guarded_classes(const std::vector<function_spec>& specs);

generated_files emit(const std::vector<function_spec>& specs, const std::vector<guarded_class>& classes,
                     const emit_options& options);
// The same with guarded_classes(specs).
generated_files emit(const std::vector<function_spec>& specs, const emit_options& options);

}  // namespace idem::annotate
