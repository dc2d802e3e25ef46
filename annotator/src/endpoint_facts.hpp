// annotator/src/endpoint_facts.hpp — whether a function is an HTTP endpoint, read from Clang's AST:
// the exact signature a server's adapter calls (cpp-httplib's, or idem::http::beast's), and why a
// function that takes such a server's request or response is not one.
#pragma once

#include <optional>
#include <string>

#include <clang/AST/Decl.h>

#include "model.hpp"

namespace idem::annotate {

// The server an HTTP endpoint is written for, whose key comes from the Idempotency-Key header, or
// none. A function that takes a request or response of cpp-httplib or Beast but is not an endpoint
// gets none and `problem`, for the validator to refuse it (rule "http-endpoint-signature").
std::optional<http_server> http_endpoint_server(const clang::FunctionDecl& fn, std::string& problem);

}  // namespace idem::annotate
