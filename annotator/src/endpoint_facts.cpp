// annotator/src/endpoint_facts.cpp — see endpoint_facts.hpp.
#include "endpoint_facts.hpp"

#include <string_view>

#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>

#include "template_types.hpp"

namespace idem::annotate {

namespace {

// Judges a function that takes a request or response of some server: an endpoint when it has
// the `shape` that server's adapter calls and is a non-static member function (the adapter calls
// it on an object); otherwise a near miss, refused by the validator (`problem`) rather than guarded
// as an ordinary function: it was almost certainly meant as an endpoint, and an ordinary guard
// would key it by an expression and store no response.
bool endpoint_or_problem(const clang::FunctionDecl& fn, bool shape, std::string_view route,
                         std::string_view near_miss, std::string& problem) {
  const auto* method = llvm::dyn_cast<clang::CXXMethodDecl>(&fn);
  if (shape && method != nullptr && !method->isStatic()) return true;
  const std::string name = "'" + fn.getQualifiedNameAsString() + "'";
  if (shape)
    problem = name + " has the signature of an HTTP endpoint but is not a non-static member function: " +
              std::string(route) + " calls an endpoint on an object; make it a member function";
  else
    problem = name + std::string(near_miss) + ", or give it what its key needs instead of the request";
  return false;
}

// Whether `type`, references and qualifiers aside, is the class httplib::<name> (through any
// alias: the canonical declaration's qualified name decides, not the spelling).
bool is_httplib_class(clang::QualType type, llvm::StringRef name) {
  const clang::CXXRecordDecl* record = type.getNonReferenceType()->getAsCXXRecordDecl();
  return record != nullptr && record->getQualifiedNameAsString() == ("httplib::" + name).str();
}

// `const httplib::Request&` exactly (not volatile, not by value, not an rvalue reference).
bool is_httplib_request_parameter(clang::QualType type) {
  if (!type->isLValueReferenceType()) return false;
  const clang::QualType pointee = type.getNonReferenceType();
  return pointee.isConstQualified() && !pointee.isVolatileQualified() && is_httplib_class(pointee, "Request");
}

// `httplib::Response&` exactly (not const, not volatile).
bool is_httplib_response_parameter(clang::QualType type) {
  if (!type->isLValueReferenceType()) return false;
  const clang::QualType pointee = type.getNonReferenceType();
  return !pointee.isConstQualified() && !pointee.isVolatileQualified() && is_httplib_class(pointee, "Response");
}

// A cpp-httplib endpoint: `void m(const httplib::Request&, httplib::Response&)` on an object,
// whatever the parameters' names (the validator requires void). False without `problem` when the
// function takes no httplib::Request or httplib::Response.
bool is_httplib_endpoint(const clang::FunctionDecl& fn, std::string& problem) {
  bool mentions_httplib = false;
  for (const clang::ParmVarDecl* param : fn.parameters())
    mentions_httplib = mentions_httplib || is_httplib_class(param->getType(), "Request") ||
                       is_httplib_class(param->getType(), "Response");
  if (!mentions_httplib) return false;
  const bool shape = fn.getNumParams() == 2 && is_httplib_request_parameter(fn.getParamDecl(0)->getType()) &&
                     is_httplib_response_parameter(fn.getParamDecl(1)->getType());
  return endpoint_or_problem(fn, shape, "idem::http::route<&C::m>",
                             " takes an httplib::Request or httplib::Response but is not an HTTP endpoint, which is "
                             "a non-static member function with exactly the parameters (const httplib::Request&, "
                             "httplib::Response&); give it these parameters",
                             problem);
}

// A Beast request or response: boost::beast::http::message<isRequest, Body, Fields>.
const clang::ClassTemplateSpecializationDecl* beast_message(clang::QualType type) {
  return specialization_of(type, "boost::beast::http::message");
}

// Whether `message` is a request (or a response) as idem::http::beast's router reads and writes
// them: http::string_body and Beast's default fields (request_type, response_type).
bool is_beast_string_message(const clang::ClassTemplateSpecializationDecl& message, bool request) {
  const clang::TemplateArgumentList& args = message.getTemplateArgs();
  if (args.size() != 3 || args[0].getKind() != clang::TemplateArgument::Integral ||
      args[0].getAsIntegral().getBoolValue() != request || args[1].getKind() != clang::TemplateArgument::Type)
    return false;
  // Compared with the alias http::string_body, declared in message's namespace.
  const clang::DeclContext* beast_http = message.getSpecializedTemplate()->getDeclContext();
  clang::ASTContext& context = message.getASTContext();
  bool string_body = false;
  for (const clang::NamedDecl* found : beast_http->lookup(&context.Idents.get("string_body")))
    if (const auto* alias = llvm::dyn_cast<clang::TypedefNameDecl>(found))
      string_body = string_body || context.hasSameType(alias->getUnderlyingType(), args[1].getAsType());
  return string_body && is_default_argument(message, 2);
}

// A Boost.Beast endpoint: the coroutine `boost::asio::awaitable<response_type> m(const
// request_type&)` on an object (idem::http::beast's request_type and response_type: string
// bodies, Beast's default fields, Asio's default executor). False without `problem` when the
// function takes no Beast message.
bool is_beast_endpoint(const clang::FunctionDecl& fn, std::string& problem) {
  bool mentions_beast = false;
  for (const clang::ParmVarDecl* param : fn.parameters())
    mentions_beast = mentions_beast || beast_message(param->getType()) != nullptr;
  if (!mentions_beast) return false;
  bool shape = false;
  if (fn.getNumParams() == 1) {
    const clang::QualType param = fn.getParamDecl(0)->getType();
    const clang::QualType pointee = param.getNonReferenceType();
    const clang::ClassTemplateSpecializationDecl* request = beast_message(param);
    const clang::ClassTemplateSpecializationDecl* awaitable =
        specialization_of(fn.getReturnType(), "boost::asio::awaitable");
    const clang::ClassTemplateSpecializationDecl* response =
        awaitable != nullptr ? beast_message(awaitable->getTemplateArgs()[0].getAsType()) : nullptr;
    shape = param->isLValueReferenceType() && pointee.isConstQualified() && !pointee.isVolatileQualified() &&
            request != nullptr && is_beast_string_message(*request, true) && response != nullptr &&
            !fn.getReturnType()->isReferenceType() && is_beast_string_message(*response, false) &&
            is_default_argument(*awaitable, 1);
  }
  return endpoint_or_problem(fn, shape, "idem::http::beast::route<&C::m>",
                             " takes a Boost.Beast request or response but is not an HTTP endpoint, which is a "
                             "non-static member function with exactly the signature boost::asio::awaitable<"
                             "idem::http::beast::response_type>(const idem::http::beast::request_type&); give it this "
                             "signature",
                             problem);
}

}  // namespace

// Either server's shape: see is_httplib_endpoint and is_beast_endpoint.
std::optional<http_server> http_endpoint_server(const clang::FunctionDecl& fn, std::string& problem) {
  if (is_httplib_endpoint(fn, problem)) return http_server::httplib;
  if (problem.empty() && is_beast_endpoint(fn, problem)) return http_server::beast;
  return std::nullopt;
}

}  // namespace idem::annotate
