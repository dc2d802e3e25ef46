// annotator/src/function_rules.cpp — the rules about the function an attribute stands before: what
// can be guarded at all, and what idem::guarded<C>'s wrapper can override. See validator_rules.hpp.
#include "validator_rules.hpp"

namespace idem::annotate {

namespace {

// A member function of a class that gets an idem::guarded<C>: its wrapper is the function (an
// override must keep what the function promises), so the guarded-* rules apply. An HTTP endpoint
// gets no wrapper (the server calls it through idem::http::route), nor does a member of a final
// class or a static or free function (idem::invoke guards them, and throws outside them).
bool gets_guarded_wrapper(const function_facts& facts) {
  return facts.kind == function_kind::member && !facts.class_is_final && !facts.http_endpoint;
}

// Reports `message` on the attribute when `refused`.
bool refuse(validation_state& state, bool refused, std::string message) {
  if (refused) state.error(state.attribute.position, std::move(message));
  return refused;
}

// ---------------------------------------------------------------------------------------------
// What cannot be guarded at all.

bool special_function(validation_state& s) {
  return refuse(s, s.facts.is_special,
                s.attribute_name +
                    " cannot be applied to a constructor, destructor, conversion function or "
                    "operator: annotate a named function that it calls");
}

bool function_template(validation_state& s) {
  return refuse(s, s.facts.is_template,
                s.attribute_name + " on " + display_name(s.facts) +
                    " is not supported: it is a template or a member of one; annotate a "
                    "non-template function that calls it");
}

bool c_variadic(validation_state& s) {
  return refuse(s, s.facts.is_variadic,
                s.attribute_name + " on " + display_name(s.facts) +
                    " is not supported: C-style variadic functions cannot be forwarded");
}

bool internal_linkage(validation_state& s) {
  return refuse(s, s.facts.internal_linkage,
                display_name(s.facts) +
                    " has internal linkage (static, or in an anonymous namespace): the "
                    "generated code, compiled in its own translation unit, cannot name "
                    "it; give it external linkage");
}

bool pure_virtual(validation_state& s) {
  return refuse(s, s.facts.is_pure,
                display_name(s.facts) +
                    " is pure virtual: there is no body to guard; annotate the overriding "
                    "functions instead");
}

bool private_member(validation_state& s) {
  return refuse(s, s.facts.is_private && s.facts.kind == function_kind::member,
                display_name(s.facts) + " is private: the generated idem::policy and idem::guarded<" +
                    s.facts.simple_class + "> cannot name it; make it public");
}

bool protected_member(validation_state& s) {
  return refuse(s, s.facts.is_protected && s.facts.kind == function_kind::member,
                display_name(s.facts) +
                    " is protected: the generated idem::policy, idem::invoke and the "
                    "registration cannot name it outside the class; make it public");
}

// ---------------------------------------------------------------------------------------------
// HTTP endpoints: exactly the shape their server's adapter calls.

// A function that takes a request or response of cpp-httplib or Beast but is not an endpoint
// (declaration_facts says why): almost certainly meant as one.
bool http_endpoint_signature(validation_state& s) {
  return refuse(s, !s.facts.http_problem.empty(), s.facts.http_problem);
}

// A cpp-httplib endpoint answers through its httplib::Response, which the adapter stores and
// replays; a Beast one's shape includes its return type.
bool http_endpoint_returns_void(validation_state& s) {
  return refuse(s, s.facts.http_endpoint && s.facts.server == http_server::httplib && !s.facts.returns_void,
                display_name(s.facts) + " is an HTTP endpoint and returns '" + s.facts.return_type +
                    "': an endpoint answers through its httplib::Response, which is "
                    "what is stored and replayed; return void");
}

// ---------------------------------------------------------------------------------------------
// What idem::guarded<C>'s wrapper cannot override or keep.

// A guarded call throws even when the function cannot; through a noexcept wrapper, std::terminate.
bool guarded_noexcept(validation_state& s) {
  return refuse(s, s.facts.is_noexcept && gets_guarded_wrapper(s.facts),
                display_name(s.facts) +
                    " is noexcept, but a guarded call can throw even when the function "
                    "does not: in_flight_error for a duplicate that is still running, "
                    "store errors, lease_lost_error; through the noexcept wrapper in "
                    "idem::guarded<" +
                    s.facts.simple_class + "> each would call std::terminate; remove noexcept");
}

bool guarded_final(validation_state& s) {
  return refuse(s, s.facts.is_final && gets_guarded_wrapper(s.facts),
                display_name(s.facts) + " is final: idem::guarded<" + s.facts.simple_class +
                    "> must override it to guard calls through a " + s.facts.simple_class +
                    "&; remove final, or make the class final "
                    "(then only idem::invoke guards it)");
}

// The wrapper evaluates default arguments from a derived class, which sees no private member.
bool guarded_default_argument(validation_state& s) {
  if (!gets_guarded_wrapper(s.facts)) return false;
  for (const parameter& p : s.facts.parameters)
    if (!p.default_private_member.empty())
      return refuse(s, true,
                    "the default argument of '" + p.name + "' uses the private '" + p.default_private_member +
                        "', which idem::guarded<" + s.facts.simple_class +
                        "> cannot evaluate; make it protected or public");
  return false;
}

// The wrapper re-declares the name with `using C::m;`, which must not change any overload's access.
bool guarded_overload_access(validation_state& s) {
  return refuse(s, !s.facts.non_public_overload.empty() && gets_guarded_wrapper(s.facts),
                display_name(s.facts) + " has a non-public overload '" + s.facts.non_public_overload +
                    "': idem::guarded<" + s.facts.simple_class + "> keeps every overload callable with `using " +
                    s.facts.simple_class + "::" + s.facts.name +
                    ";`, which would change its access; make the overloads public or rename one");
}

// ---------------------------------------------------------------------------------------------
// What a duplicate call could not be given back.

bool rvalue_ref_qualifier(validation_state& s) {
  return refuse(s, s.facts.ref_qualifier == "&&",
                display_name(s.facts) +
                    " is '&&'-qualified: only unqualified, const and '&' member functions "
                    "can be guarded");
}

bool returns_reference(validation_state& s) {
  return refuse(s, s.facts.returns_reference,
                display_name(s.facts) + " returns a reference ('" + s.facts.return_type +
                    "'): a duplicate call is given a decoded copy of the first result, "
                    "never a reference; return by value");
}

// boost::asio::awaitable<T> functions are guarded asynchronously; anything else that suspends or
// completes later would be guarded only while it is created, not while it runs.
bool async_return_type(validation_state& s) {
  if (s.facts.unknown_async_type.empty()) return false;
  s.error(s.attribute.position,
          display_name(s.facts) + " returns '" + s.facts.unknown_async_type +
              "', which runs or completes after it returns: idem cannot guard it, since guarding "
              "the call that creates it would not guard the work it does");
  s.note(s.attribute.position,
         "supported: a function returning boost::asio::awaitable<T> (idem::invoke and idem::guarded<C>'s "
         "wrapper co_await idem::async_execute, <idem/asio.hpp>), or a function returning its result");
  return true;
}

constexpr function_rule function_table[] = {
    {"special-function", special_function},
    {"function-template", function_template},
    {"c-variadic", c_variadic},
    {"internal-linkage", internal_linkage},
    {"pure-virtual", pure_virtual},
    {"private-member", private_member},
    {"protected-member", protected_member},
    {"http-endpoint-signature", http_endpoint_signature},
    {"http-endpoint-returns-void", http_endpoint_returns_void},
    {"guarded-noexcept", guarded_noexcept},
    {"guarded-final", guarded_final},
    {"guarded-default-argument", guarded_default_argument},
    {"guarded-overload-access", guarded_overload_access},
    {"rvalue-ref-qualifier", rvalue_ref_qualifier},
    {"returns-reference", returns_reference},
    {"async-return-type", async_return_type},
};

}  // namespace

std::span<const function_rule> function_rules() { return function_table; }

}  // namespace idem::annotate
