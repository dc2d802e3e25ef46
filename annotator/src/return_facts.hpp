// annotator/src/return_facts.hpp — what a function's return type says, read from Clang's AST: what a
// duplicate call is given back, and whether it is a coroutine idem guards (boost::asio::awaitable<T>)
// or something asynchronous it cannot guard.
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>

#include "model.hpp"

namespace idem::annotate {

// Sets the return type's facts: return_type, code_return_type, returns_void, returns_reference,
// is_async, value_type, code_value_type and unknown_async_type.
void read_return_facts(const clang::FunctionDecl& fn, const clang::ASTContext& context, function_facts& facts);

}  // namespace idem::annotate
