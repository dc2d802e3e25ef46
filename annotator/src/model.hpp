// annotator/src/model.hpp — the data idem-annotate moves between its stages.
//
//   scan (Clang)  ──raw_attribute + function_facts──>  validate (pure)  ──function_spec──>  emit (pure)
//                                                              └──diagnostic──> print (Clang style)
//
// Nothing here includes Clang: the validator and the emitter are unit-tested without it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <idem/context.hpp>
#include <idem/transaction.hpp>

namespace idem::annotate {

// A place in a source file; line and column are 1-based, columns count bytes like Clang's.
struct source_position {
  std::string file;
  unsigned line = 0;
  unsigned column = 0;

  friend bool operator==(const source_position&, const source_position&) = default;
};

enum class severity { error, warning, note };

// One message for the user, printed as `file:line:col: error: message` with the source line and
// a caret under `position`.
struct diagnostic {
  severity level = severity::error;
  source_position position;
  std::string message;
};

// One `name = "value"` argument of the attribute, as written.
struct raw_argument {
  std::string name;
  source_position name_position;
  // The value after decoding the string literal(s) (escapes resolved, adjacent literals joined).
  std::string value;
  // Where the literal starts (its opening quote).
  source_position value_position;
  // Where each decoded character of `value` was written, plus one past the end (the closing
  // quote): value_characters.size() == value.size() + 1. Lets a diagnostic point at the exact
  // offending character even after an escape sequence.
  std::vector<source_position> value_characters;

  // Where the character at `index` of the value was written (clamped to the closing quote).
  source_position character(std::size_t index) const;
};

// One `[[idem::idempotent(...)]]` as found in the token stream.
struct raw_attribute {
  source_position position;  // of the attribute name (`idempotent`)
  std::string spelling;      // "idem::idempotent" or "idempotent"
  std::vector<raw_argument> arguments;
};

struct parameter {
  std::string type;      // fully qualified, as messages show it: "const shop::OrderPlaced&"
  std::string key_type;  // what the key function takes: `const T&` for `T` and `T&&`, `T&` for `T&`
  std::string name;      // empty if unnamed
  source_position position;  // of the name in the declaration
  // The same types as generated code spells them, from the global namespace ("const
  // ::shop::OrderPlaced&"), so that no name of idem's or of the class can capture them. Empty =
  // `type` / `key_type` (hand-built facts in unit tests).
  std::string code_type;
  std::string code_key_type;
  // The default argument as written (empty: none), and what a function returning it returns:
  // the parameter's type without `const &` (a non-const lvalue reference stays a reference).
  std::string default_argument;
  source_position default_position;
  std::string default_type;
  // A private member the default argument uses ("Account::secret"), or empty: the generated
  // class that evaluates it derives from the class and cannot see private members.
  std::string default_private_member;

  const std::string& spelled_type() const { return code_type.empty() ? type : code_type; }
  const std::string& spelled_key_type() const { return code_key_type.empty() ? key_type : code_key_type; }
};

enum class function_kind { free, static_member, member };

// The server an HTTP endpoint is written for: its parameters and return type say which, and so
// which adapter calls it (idem::http::route, or idem::http::beast::route).
enum class http_server { httplib, beast };

// What the scanner learned about the function an attribute stands before.
struct function_facts {
  function_kind kind = function_kind::free;
  std::string qualified_name;   // "shop::OrderListener::settle", "rebuild_index"
  std::string name;             // "settle"
  std::string simple_class;     // "OrderListener" (empty for a free function)
  std::string qualified_class;  // "shop::OrderListener" (empty for a free function)
  std::string return_type;      // fully qualified, "void" for none
  std::string code_return_type; // as generated code spells it ("::shop::Receipt"); empty = return_type
  std::string pointer_type;     // "void (::shop::OrderListener::*)(const ::shop::OrderPlaced&)"
  // The classes between the namespace and the function, joined by '_' ("Outer_Handler"), so that
  // helpers of two nested classes of the same name do not collide; empty = simple_class.
  std::string class_path;
  bool returns_void = true;  // nothing to replay: void, or a coroutine of no value (awaitable<void>)
  bool returns_reference = false;
  // A coroutine returning boost::asio::awaitable<T>: idem::guarded<C> overrides it with a wrapper
  // that suspends (<idem/asio.hpp>). `value_type` is T, what a duplicate is given back ("void" for
  // none), as messages show it and as generated code spells it.
  bool is_async = false;
  std::string value_type;
  std::string code_value_type;
  // A return type that is a coroutine or an awaitable idem cannot guard (std::future, another
  // library's task type), as messages show it: refused at the attribute. Empty otherwise.
  std::string unknown_async_type;
  bool is_virtual = false;
  bool is_pure = false;
  bool is_const = false;
  std::string ref_qualifier;  // "", "&" or "&&"
  bool is_noexcept = false;
  bool is_private = false;
  bool is_protected = false;
  bool is_final = false;           // a virtual function marked final
  bool class_is_final = false;     // its class is final: there is no idem::guarded<C>, only invoke
  // An overload of the same name in the class that is not public ("void put(std::string)"), or
  // empty: idem::guarded<C> re-declares the name with `using C::m;`, which must not change access.
  std::string non_public_overload;
  bool is_template = false;        // a function template or a member of a class template
  bool is_special = false;         // constructor, destructor, conversion or operator
  bool is_overloaded = false;      // the name has other overloads: generated code casts
  bool is_variadic = false;
  bool internal_linkage = false;   // static, or in an anonymous namespace
  // An HTTP endpoint: a non-static member function of the exact shape its server's adapter calls,
  // `void m(const httplib::Request&, httplib::Response&)` or the Beast coroutine `awaitable<response>
  // m(const request&)`; see is_http_endpoint() in declaration_facts.cpp.
  bool http_endpoint = false;
  http_server server = http_server::httplib;  // when http_endpoint
  // Why a function that takes a request or response of cpp-httplib or Beast is not an endpoint (a
  // free function, other parameters), for the validator to refuse it; empty otherwise.
  std::string http_problem;
  std::vector<parameter> parameters;
  // The namespaces around the function (for a member: around its class), as generated code must
  // reopen them: "namespace shop { " / "} ", and "shop" to qualify names declared there.
  std::string namespace_open;
  std::string namespace_close;
  std::string namespace_name;
};

// The spelling of a function's return type in generated code.
inline const std::string& spelled_return_type(const function_facts& facts) {
  return facts.code_return_type.empty() ? facts.return_type : facts.code_return_type;
}

// What a duplicate call is given back: the return type, or a coroutine's value type. As messages
// show it, and as generated code spells it.
inline const std::string& replayed_type(const function_facts& facts) {
  return facts.is_async ? facts.value_type : facts.return_type;
}
inline const std::string& spelled_replayed_type(const function_facts& facts) {
  if (!facts.is_async) return spelled_return_type(facts);
  return facts.code_value_type.empty() ? facts.value_type : facts.code_value_type;
}

// Everything the generated code needs about one annotated function: the validated attribute.
struct function_spec {
  function_facts facts;
  source_position position;  // of the attribute
  std::string scope;
  bool scope_is_default = true;
  source_position scope_position;  // of the scope value, or the attribute
  call_options options;
  std::optional<transaction_demand> transaction;  // unset: the attribute does not say (caller)
  std::string key;                 // the key expression
  source_position key_position;    // of the first character of the key expression
  std::vector<source_position> key_characters;  // see raw_argument::value_characters
  std::string codec;               // empty for a void function
  source_position codec_position;
  std::vector<source_position> codec_characters;
};

// One annotated method that idem::guarded<C> overrides (virtual) or hides (non-virtual): declared
// in C, or inherited from an annotated base (then its policy is the base's).
struct guarded_method {
  function_facts facts;       // of the annotated declaration
  source_position position;   // of its attribute
  bool inherited = false;
};

// One idem::guarded<C>: every annotated method C has, its own and inherited ones.
struct guarded_class {
  std::string name;        // "shop::OrderListener", for comments
  std::string code_name;   // "::shop::OrderListener"
  std::vector<guarded_method> methods;
  // Generated headers that define the policies of inherited methods annotated in other headers,
  // each with the header it is generated from: {"base.idem.hpp", "base.hpp"}.
  std::vector<std::pair<std::string, std::string>> includes;
};

// The result of validating one attribute: a spec, or at least one error.
struct validation_result {
  std::optional<function_spec> spec;
  // As much of the spec as could be read even when there are errors, so that the key expression
  // and the codec are still checked and every mistake is reported in one run.
  function_spec partial;
  std::vector<diagnostic> diagnostics;

  bool ok() const noexcept { return spec.has_value(); }
};

}  // namespace idem::annotate
