// annotator/src/validator.cpp — see validator.hpp.
#include "validator.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include <idem/context.hpp>
#include <idem/duration.hpp>
#include <idem/identity.hpp>
#include <idem/policy_registry.hpp>
#include <idem/transaction.hpp>

namespace idem::annotate {

source_position raw_argument::character(std::size_t index) const {
  if (value_characters.empty()) return value_position;
  return value_characters[std::min(index, value_characters.size() - 1)];
}

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

diagnostic error_at(source_position where, std::string message) {
  return diagnostic{severity::error, std::move(where), std::move(message)};
}

diagnostic note_at(source_position where, std::string message) {
  return diagnostic{severity::note, std::move(where), std::move(message)};
}

std::string display_name(const function_facts& facts) { return "'" + facts.qualified_name + "'"; }

// The first character of a value, inside its opening quote.
source_position value_start(const raw_argument& argument) { return argument.character(0); }

// Parses one duration argument and checks its bounds (the runtime's duration_problem). Empty
// means "engine default".
std::optional<std::chrono::milliseconds> check_duration(const raw_argument& argument, std::string_view what,
                                                        duration_field field, std::vector<diagnostic>& out) {
  if (argument.value.empty()) return std::nullopt;
  const duration_parse_result parsed = parse_duration(argument.value);
  if (!parsed.ok()) {
    out.push_back(error_at(argument.character(parsed.position),
                           "invalid " + std::string(what) + " \"" + argument.value + "\": " + std::string(parsed.message)));
    return std::nullopt;
  }
  if (const std::string_view problem = duration_problem(field, parsed.value); !problem.empty()) {
    out.push_back(error_at(value_start(argument), std::string(what) + " \"" + argument.value + "\" is too short: " +
                                                      std::string(problem)));
    return std::nullopt;
  }
  return parsed.value;
}

}  // namespace

const std::vector<std::string_view>& argument_names() {
  static const std::vector<std::string_view> names{"key",        "scope", "ttl",        "lease",
                                                   "waitTimeout", "completion", "transaction", "codec"};
  return names;
}

std::string suggest_argument(std::string_view name) {
  std::string best;
  std::size_t best_distance = 3;
  for (std::string_view candidate : argument_names()) {
    const std::size_t distance = edit_distance(lower(name), lower(candidate));
    if (distance < best_distance) {
      best_distance = distance;
      best = std::string(candidate);
    }
  }
  return best;
}

std::string default_scope(const function_facts& facts) {
  if (facts.kind == function_kind::free) return facts.name;
  return facts.simple_class + "." + facts.name;
}

validation_result validate(const raw_attribute& attribute, const function_facts& facts) {
  validation_result result;
  std::vector<diagnostic>& out = result.diagnostics;
  const std::string attribute_name = attribute.spelling.empty() ? "idem::idempotent" : attribute.spelling;

  // What kind of function it is: some cannot be guarded at all.
  if (facts.is_special) {
    out.push_back(error_at(attribute.position, attribute_name +
                                                   " cannot be applied to a constructor, destructor, conversion function or "
                                                   "operator: annotate a named function that it calls"));
    return result;
  }
  if (facts.is_template) {
    out.push_back(error_at(attribute.position, attribute_name + " on " + display_name(facts) +
                                                   " is not supported: it is a template or a member of one; annotate a "
                                                   "non-template function that calls it"));
    return result;
  }
  if (facts.is_variadic) {
    out.push_back(error_at(attribute.position, attribute_name + " on " + display_name(facts) +
                                                   " is not supported: C-style variadic functions cannot be forwarded"));
    return result;
  }
  if (facts.internal_linkage) {
    out.push_back(error_at(attribute.position, display_name(facts) +
                                                   " has internal linkage (static, or in an anonymous namespace): the "
                                                   "generated code, compiled in its own translation unit, cannot name "
                                                   "it; give it external linkage"));
    return result;
  }
  if (facts.is_pure) {
    out.push_back(error_at(attribute.position, display_name(facts) +
                                                   " is pure virtual: there is no body to guard; annotate the overriding "
                                                   "functions instead"));
    return result;
  }
  if (facts.is_private && facts.kind == function_kind::member) {
    out.push_back(error_at(attribute.position, display_name(facts) +
                                                   " is private: the generated idem::policy and idem::guarded<" +
                                                   facts.simple_class + "> cannot name it; make it public"));
    return result;
  }
  if (facts.is_protected && facts.kind == function_kind::member) {
    out.push_back(error_at(attribute.position,
                           display_name(facts) + " is protected: the generated idem::policy, idem::invoke and the "
                                                 "registration cannot name it outside the class; make it public"));
    return result;
  }
  // HTTP endpoints: exactly the shape their server's adapter calls. A cpp-httplib endpoint returns
  // nothing (the answer is the httplib::Response, which the adapter stores and replays); a Beast
  // one's shape includes its return type.
  if (!facts.http_problem.empty()) {
    out.push_back(error_at(attribute.position, facts.http_problem));
    return result;
  }
  if (facts.http_endpoint && facts.server == http_server::httplib && !facts.returns_void) {
    out.push_back(error_at(attribute.position, display_name(facts) + " is an HTTP endpoint and returns '" +
                                                   facts.return_type +
                                                   "': an endpoint answers through its httplib::Response, which is "
                                                   "what is stored and replayed; return void"));
    return result;
  }
  // The rules below are about idem::guarded<C>'s wrapper, which an endpoint does not get (the
  // server calls it through idem::http::route).
  // idem::invoke throws outside the function, so a noexcept free function, static member or member
  // of a final class is fine; idem::guarded<C>'s wrapper is the function (an override must keep
  // noexcept), and there the throw would be std::terminate.
  if (facts.is_noexcept && facts.kind == function_kind::member && !facts.class_is_final && !facts.http_endpoint) {
    out.push_back(error_at(attribute.position,
                           display_name(facts) + " is noexcept, but a guarded call can throw even when the function "
                                                 "does not: in_flight_error for a duplicate that is still running, "
                                                 "store errors, lease_lost_error; through the noexcept wrapper in "
                                                 "idem::guarded<" + facts.simple_class +
                                                 "> each would call std::terminate; remove noexcept"));
    return result;
  }
  if (facts.is_final && facts.kind == function_kind::member && !facts.class_is_final && !facts.http_endpoint) {
    out.push_back(error_at(attribute.position, display_name(facts) + " is final: idem::guarded<" + facts.simple_class +
                                                   "> must override it to guard calls through a " +
                                                   facts.simple_class + "&; remove final, or make the class final "
                                                   "(then only idem::invoke guards it)"));
    return result;
  }
  if (facts.kind == function_kind::member && !facts.class_is_final && !facts.http_endpoint)
    for (const parameter& p : facts.parameters)
      if (!p.default_private_member.empty()) {
        out.push_back(error_at(attribute.position,
                               "the default argument of '" + p.name + "' uses the private '" + p.default_private_member +
                                   "', which idem::guarded<" + facts.simple_class +
                                   "> cannot evaluate; make it protected or public"));
        return result;
      }
  if (!facts.non_public_overload.empty() && facts.kind == function_kind::member && !facts.class_is_final &&
      !facts.http_endpoint) {
    out.push_back(error_at(attribute.position,
                           display_name(facts) + " has a non-public overload '" + facts.non_public_overload +
                               "': idem::guarded<" + facts.simple_class + "> keeps every overload callable with `using " +
                               facts.simple_class + "::" + facts.name +
                               ";`, which would change its access; make the overloads public or rename one"));
    return result;
  }
  if (facts.ref_qualifier == "&&") {
    out.push_back(error_at(attribute.position, display_name(facts) +
                                                   " is '&&'-qualified: only unqualified, const and '&' member functions "
                                                   "can be guarded"));
    return result;
  }
  if (facts.returns_reference) {
    out.push_back(error_at(attribute.position, display_name(facts) + " returns a reference ('" + facts.return_type +
                                                   "'): a duplicate call is given a decoded copy of the first result, "
                                                   "never a reference; return by value"));
    return result;
  }
  // Coroutines: boost::asio::awaitable<T> functions are guarded asynchronously; anything else that
  // suspends or completes later would be guarded only while it is created, not while it runs.
  if (!facts.unknown_async_type.empty()) {
    out.push_back(error_at(attribute.position,
                           display_name(facts) + " returns '" + facts.unknown_async_type +
                               "', which runs or completes after it returns: idem cannot guard it, since guarding "
                               "the call that creates it would not guard the work it does"));
    out.push_back(note_at(attribute.position,
                          "supported: a function returning boost::asio::awaitable<T> (idem::invoke and idem::guarded<C>'s "
                          "wrapper co_await idem::async_execute, <idem/asio.hpp>), or a function returning its result"));
    return result;
  }

  // Names: known and given once.
  std::map<std::string, const raw_argument*, std::less<>> given;
  for (const raw_argument& argument : attribute.arguments) {
    const auto& names = argument_names();
    if (std::find(names.begin(), names.end(), argument.name) == names.end()) {
      const std::string suggestion = suggest_argument(argument.name);
      if (!suggestion.empty())
        out.push_back(error_at(argument.name_position, "unknown argument '" + argument.name + "' in " + attribute_name +
                                                           "; did you mean '" + suggestion + "'?"));
      else
        out.push_back(error_at(argument.name_position,
                               "unknown argument '" + argument.name + "' in " + attribute_name +
                                   "; expected key, scope, ttl, lease, waitTimeout, completion, transaction or codec"));
      continue;
    }
    auto [it, inserted] = given.emplace(argument.name, &argument);
    if (!inserted) {
      out.push_back(error_at(argument.name_position, "duplicate argument '" + argument.name + "' in " + attribute_name));
      out.push_back(note_at(it->second->name_position, "'" + argument.name + "' first given here"));
    }
  }
  auto find = [&](std::string_view name) -> const raw_argument* {
    auto it = given.find(name);
    return it == given.end() ? nullptr : it->second;
  };

  function_spec spec;
  spec.facts = facts;
  spec.position = attribute.position;

  // HTTP endpoints take key, codec and completion from the HTTP adapter.
  if (facts.http_endpoint) {
    static constexpr std::pair<std::string_view, std::string_view> refused[] = {
        {"key", "its key comes from the Idempotency-Key header"},
        {"codec", "the HTTP adapter stores and replays the response itself"},
        {"completion", "an HTTP endpoint always completes autonomously"},
        {"transaction", "its server's adapter calls it, and opens no transaction; begin one in the handler"},
    };
    for (const auto& [name, why] : refused)
      if (const raw_argument* argument = find(name))
        out.push_back(error_at(argument->name_position,
                               "'" + std::string(name) + "' is not allowed on an HTTP endpoint: " + std::string(why)));
  }

  // key: required on functions, an expression over the parameters (type-checked by Sema later).
  if (!facts.http_endpoint) {
    const raw_argument* key = find("key");
    if (key == nullptr || key->value.find_first_not_of(" \t") == std::string::npos) {
      std::string example = facts.parameters.empty() || facts.parameters.front().name.empty()
                                ? std::string("key = \"<expression over the parameters>\"")
                                : "key = \"" + facts.parameters.front().name + ".id\"";
      out.push_back(error_at(key == nullptr ? attribute.position : value_start(*key),
                             attribute_name + " on " + display_name(facts) +
                                 " needs a key: an expression over its parameters that names the attempt, for example " +
                                 example));
    } else {
      spec.key = key->value;
      spec.key_position = value_start(*key);
      spec.key_characters = key->value_characters;
    }
  }

  // scope: explicit or default; the runtime's rule either way. An empty scope means the default,
  // as in the original library, and does not count as naming one.
  const raw_argument* scope = find("scope");
  if (scope != nullptr && !scope->value.empty()) {
    spec.scope = scope->value;
    spec.scope_is_default = false;
    spec.scope_position = value_start(*scope);
    if (std::string problem = scope_problem(scope->value); !problem.empty())
      out.push_back(error_at(value_start(*scope), "invalid scope \"" + scope->value + "\": " + problem));
  } else {
    spec.scope = default_scope(facts);
    spec.scope_position = scope != nullptr ? scope->value_position : attribute.position;
    if (std::string problem = scope_problem(spec.scope); !problem.empty())
      out.push_back(error_at(attribute.position, "the default scope \"" + spec.scope + "\" of " + display_name(facts) +
                                                     " is invalid: " + problem + "; set scope = \"...\""));
  }

  // Durations: one parser for the generator and the runtime, and the runtime's lower bounds.
  if (const raw_argument* ttl = find("ttl"))
    spec.options.ttl = check_duration(*ttl, "ttl", duration_field::ttl, out);
  if (const raw_argument* lease = find("lease"))
    spec.options.lease = check_duration(*lease, "lease", duration_field::lease, out);
  if (const raw_argument* wait = find("waitTimeout"))
    // The grammar has no sign, so every parsed wait is >= 0 (PT0S = look once, never block).
    spec.options.wait = check_duration(*wait, "waitTimeout", duration_field::wait, out);

  // transaction: the runtime's parser.
  if (const raw_argument* transaction = find("transaction");
      transaction && !transaction->value.empty() && !facts.http_endpoint) {
    if (auto demand = parse_transaction_demand(transaction->value)) {
      spec.transaction = *demand;
    } else {
      out.push_back(error_at(value_start(*transaction), "unknown transaction \"" + transaction->value +
                                                            "\"; expected \"caller\" or \"required\""));
    }
  }

  // completion: the runtime's parser.
  if (const raw_argument* completion = find("completion"); completion && !completion->value.empty()) {
    if (auto mode = parse_completion_mode(completion->value)) {
      spec.options.completion = *mode;
      if (*mode == completion_mode::join_transaction && facts.is_async && !facts.http_endpoint &&
          spec.transaction != transaction_demand::required)
        out.push_back(error_at(value_start(*completion),
                               "completion \"join-transaction\" on a coroutine needs transaction = \"required\": a "
                               "transaction bound to a thread does not survive a co_await, so a coroutine can join "
                               "only the transaction its wrapper begins and carries; or use \"autonomous\""));
    } else
      out.push_back(error_at(value_start(*completion), "unknown completion mode \"" + completion->value +
                                                           "\"; expected \"autonomous\" or \"join-transaction\""));
  }

  // codec: required exactly when there is a value to replay (the type itself is checked by Sema).
  // An empty codec is none; one of only spaces names nothing either, but is not empty, so a void
  // function refuses it like any codec, and a value-returning one is told at the value to name one.
  const raw_argument* codec = find("codec");
  const bool codec_named = codec != nullptr && codec->value.find_first_not_of(" \t\n\r\f\v") != std::string::npos;
  if (!facts.http_endpoint) {
    if (facts.returns_void && codec != nullptr && !codec->value.empty()) {
      out.push_back(error_at(value_start(*codec), "codec \"" + codec->value + "\" is pointless: " + display_name(facts) +
                                                      (facts.is_async ? " produces no value" : " returns void") +
                                                      " and has nothing to replay"));
    } else if (!facts.returns_void && !codec_named) {
      out.push_back(error_at(codec ? value_start(*codec) : attribute.position,
                             display_name(facts) + (facts.is_async ? " produces '" : " returns '") +
                                 replayed_type(facts) +
                                 "', so a duplicate call must be given that value back: name a codec that encodes it, "
                                 "for example codec = \"idem::json_codec\""));
    } else if (codec_named) {
      spec.codec = codec->value;
      spec.codec_position = value_start(*codec);
      spec.codec_characters = codec->value_characters;
    }
  }

  const bool has_error =
      std::any_of(out.begin(), out.end(), [](const diagnostic& d) { return d.level == severity::error; });
  result.partial = spec;
  if (!has_error) result.spec = std::move(spec);
  return result;
}

namespace {

// How a function is named in a scope conflict: overloads by their parameter types, since their
// qualified names are the same.
std::string claim_name(const function_facts& facts) {
  if (!facts.is_overloaded) return facts.qualified_name;
  std::string out = facts.qualified_name + "(";
  for (std::size_t i = 0; i < facts.parameters.size(); ++i) out += (i ? ", " : "") + facts.parameters[i].type;
  return out + ")";
}

}  // namespace

// The rule itself is the runtime's (idem::detail::scope_conflicts), so that a conflict within one
// header and one across headers are judged alike; here it only gets positions.
std::vector<diagnostic> check_scope_conflicts(const std::vector<function_spec>& specs) {
  std::vector<std::string> names;
  names.reserve(specs.size());
  for (const function_spec& spec : specs) names.push_back(claim_name(spec.facts));
  std::vector<detail::scope_claim> claims;
  claims.reserve(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const function_spec& spec = specs[i];
    claims.push_back(detail::scope_claim{.function = names[i],
                                         .scope = spec.scope,
                                         .scope_explicit = !spec.scope_is_default,
                                         .options = spec.options,
                                         .codec = spec.codec,
                                         .result_type = spec.facts.return_type,
                                         .http_endpoint = spec.facts.http_endpoint,
                                         .where = {}});  // the caret and the note show where
  }
  std::vector<diagnostic> out;
  for (const detail::scope_conflict& conflict : detail::scope_conflicts(claims)) {
    const function_spec& earlier = specs[conflict.earlier];
    out.push_back(error_at(specs[conflict.later].scope_position, conflict.message));
    out.push_back(note_at(earlier.scope_position,
                          "'" + names[conflict.earlier] + "' uses scope \"" + earlier.scope + "\" here"));
  }
  return out;
}

}  // namespace idem::annotate
