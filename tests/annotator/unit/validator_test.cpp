// The validator without Clang: raw arguments + facts in, spec or diagnostics out.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "validator.hpp"

namespace {

using namespace idem::annotate;
using namespace std::chrono_literals;

// A parameter with its types and name (the rest empty).
parameter make_parameter(std::string type, std::string key_type, std::string name) {
  parameter p;
  p.type = std::move(type);
  p.key_type = std::move(key_type);
  p.name = std::move(name);
  return p;
}

// An argument written on line 1 starting at `column` as `name = "value"` (no escapes).
raw_argument arg(std::string name, std::string value, unsigned column = 30) {
  raw_argument a;
  a.name = std::move(name);
  a.name_position = {"t.hpp", 1, column};
  a.value = std::move(value);
  const unsigned quote = column + static_cast<unsigned>(a.name.size()) + 3;
  a.value_position = {"t.hpp", 1, quote};
  for (unsigned i = 0; i <= a.value.size(); ++i) a.value_characters.push_back({"t.hpp", 1, quote + 1 + i});
  return a;
}

raw_attribute attribute(std::vector<raw_argument> arguments) {
  raw_attribute a;
  a.position = {"t.hpp", 1, 11};
  a.spelling = "idem::idempotent";
  a.arguments = std::move(arguments);
  return a;
}

function_facts member(std::string return_type = "void") {
  function_facts f;
  f.kind = function_kind::member;
  f.qualified_name = "shop::OrderListener::on";
  f.name = "on";
  f.simple_class = "OrderListener";
  f.qualified_class = "shop::OrderListener";
  f.returns_void = return_type == "void";
  f.return_type = std::move(return_type);
  f.parameters.push_back(make_parameter("const shop::OrderPlaced&", "const shop::OrderPlaced&", "event"));
  return f;
}

diagnostic only_error(const validation_result& r) {
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.diagnostics.size() == 1);
  return r.diagnostics.front();
}

}  // namespace

TEST_CASE("a valid attribute becomes a spec with the runtime's values", "[annotator][validator]") {
  auto r = validate(attribute({arg("key", "event.id"), arg("ttl", "P1D"), arg("lease", "PT5M"),
                               arg("waitTimeout", "PT0S"), arg("completion", "join-transaction")}),
                    member());
  REQUIRE(r.ok());
  const function_spec& s = *r.spec;
  CHECK(s.scope == "OrderListener.on");
  CHECK(s.scope_is_default);
  CHECK(s.key == "event.id");
  CHECK(s.options.ttl == std::chrono::milliseconds(24h));
  CHECK(s.options.lease == std::chrono::milliseconds(5min));
  CHECK(s.options.wait == 0ms);
  CHECK(s.options.completion == idem::completion_mode::join_transaction);
  CHECK(s.codec.empty());
}

TEST_CASE("empty durations and completion take the engine's defaults", "[annotator][validator]") {
  auto r = validate(attribute({arg("key", "event.id"), arg("ttl", ""), arg("completion", "")}), member());
  REQUIRE(r.ok());
  CHECK_FALSE(r.spec->options.ttl.has_value());
  CHECK_FALSE(r.spec->options.completion.has_value());
}

TEST_CASE("default scopes", "[annotator][validator]") {
  function_facts free_function;
  free_function.name = "rebuild_index";
  free_function.qualified_name = "jobs::rebuild_index";
  CHECK(default_scope(free_function) == "rebuild_index");
  function_facts static_member = member();
  static_member.kind = function_kind::static_member;
  CHECK(default_scope(static_member) == "OrderListener.on");
}

TEST_CASE("a bad duration points at the offending character", "[annotator][validator]") {
  const auto& d = only_error(validate(attribute({arg("key", "event.id"), arg("lease", "PT30", 50)}), member()));
  CHECK(d.message == "invalid lease \"PT30\": number without a designator (D, H, M or S)");
  // lease at 50, quote at 58, P at 59 ... the missing designator after "30" is the closing quote.
  CHECK(d.position == idem::annotate::source_position{"t.hpp", 1, 63});
}

TEST_CASE("durations below the runtime's minimum", "[annotator][validator]") {
  CHECK(only_error(validate(attribute({arg("key", "e"), arg("ttl", "PT0S")}), member())).message ==
        "ttl \"PT0S\" is too short: a result must stay replayable for at least 1 ms");
  CHECK(only_error(validate(attribute({arg("key", "e"), arg("lease", "PT0.001S")}), member())).message ==
        "lease \"PT0.001S\" is too short: it must be at least 2 ms because the heartbeat renews it every lease/2");
  CHECK(validate(attribute({arg("key", "e"), arg("lease", "PT0.002S"), arg("ttl", "PT0.001S")}), member()).ok());
}

TEST_CASE("unknown and duplicated argument names", "[annotator][validator]") {
  const auto& unknown = only_error(validate(attribute({arg("key", "e"), arg("waittimeout", "PT0S")}), member()));
  CHECK(unknown.message == "unknown argument 'waittimeout' in idem::idempotent; did you mean 'waitTimeout'?");
  CHECK(unknown.position.column == 30);
  CHECK(suggest_argument("keys") == "key");
  CHECK(suggest_argument("retries").empty());

  auto duplicate = validate(attribute({arg("key", "e"), arg("ttl", "PT1H", 40), arg("ttl", "PT2H", 60)}), member());
  REQUIRE(duplicate.diagnostics.size() == 2);
  CHECK(duplicate.diagnostics[0].message == "duplicate argument 'ttl' in idem::idempotent");
  CHECK(duplicate.diagnostics[0].position.column == 60);
  CHECK(duplicate.diagnostics[1].level == severity::note);
  CHECK(duplicate.diagnostics[1].position.column == 40);
}

TEST_CASE("a missing key is reported on the attribute", "[annotator][validator]") {
  const auto& d = only_error(validate(attribute({arg("ttl", "PT1H")}), member()));
  CHECK(d.position.column == 11);
  CHECK(d.message ==
        "idem::idempotent on 'shop::OrderListener::on' needs a key: an expression over its parameters that names "
        "the attempt, for example key = \"event.id\"");
}

TEST_CASE("scopes follow idem::scope_problem", "[annotator][validator]") {
  CHECK(only_error(validate(attribute({arg("key", "e"), arg("scope", "a:b")}), member())).message ==
        "invalid scope \"a:b\": scope must not contain ':' (stores compose scope and key with it)");
  const diagnostic blank = only_error(validate(attribute({arg("key", "e"), arg("scope", " \t")}), member()));
  CHECK(blank.message == "invalid scope \" \t\": scope must not be blank");
  CHECK(blank.position == source_position{"t.hpp", 1, 39});  // the first character inside the quotes
  CHECK(only_error(validate(attribute({arg("key", "e"), arg("scope", std::string(129, 'a'))}), member()))
            .message.find("scope must not exceed 128 characters, got 129") != std::string::npos);
  auto ok = validate(attribute({arg("key", "e"), arg("scope", "Orders.v2")}), member());
  REQUIRE(ok.ok());
  CHECK(ok.spec->scope == "Orders.v2");
  CHECK_FALSE(ok.spec->scope_is_default);
}

TEST_CASE("completion modes follow idem::parse_completion_mode", "[annotator][validator]") {
  CHECK(only_error(validate(attribute({arg("key", "e"), arg("completion", "joined")}), member())).message ==
        "unknown completion mode \"joined\"; expected \"autonomous\" or \"join-transaction\"");
  auto ok = validate(attribute({arg("key", "e"), arg("completion", "JOIN_TRANSACTION")}), member());
  REQUIRE(ok.ok());
  CHECK(ok.spec->options.completion == idem::completion_mode::join_transaction);
}

TEST_CASE("transaction demands follow idem::parse_transaction_demand", "[annotator][validator]") {
  CHECK(only_error(validate(attribute({arg("key", "e"), arg("transaction", "requires")}), member())).message ==
        "unknown transaction \"requires\"; expected \"caller\" or \"required\"");
  auto required = validate(attribute({arg("key", "e"), arg("transaction", "Required")}), member());
  REQUIRE(required.ok());
  CHECK(required.spec->transaction == idem::transaction_demand::required);
  auto unset = validate(attribute({arg("key", "e")}), member());
  REQUIRE(unset.ok());
  CHECK_FALSE(unset.spec->transaction.has_value());
  // A free function may require one too: idem::invoke then takes the transaction source.
  function_facts free_function = member();
  free_function.kind = function_kind::free;
  CHECK(validate(attribute({arg("key", "e"), arg("transaction", "required")}), free_function).ok());
}

TEST_CASE("codec: required for values, refused for void", "[annotator][validator]") {
  CHECK(only_error(validate(attribute({arg("key", "e")}), member("shop::Receipt"))).message ==
        "'shop::OrderListener::on' returns 'shop::Receipt', so a duplicate call must be given that value back: name a "
        "codec that encodes it, for example codec = \"idem::json_codec\"");
  CHECK(only_error(validate(attribute({arg("key", "e"), arg("codec", "idem::json_codec")}), member())).message ==
        "codec \"idem::json_codec\" is pointless: 'shop::OrderListener::on' returns void and has nothing to replay");
  auto ok = validate(attribute({arg("key", "e"), arg("codec", "ReceiptCodec")}), member("shop::Receipt"));
  REQUIRE(ok.ok());
  CHECK(ok.spec->codec == "ReceiptCodec");
}

TEST_CASE("HTTP endpoints refuse key, codec, completion and transaction", "[annotator][validator]") {
  function_facts endpoint = member("void");
  endpoint.http_endpoint = true;
  auto r = validate(attribute({arg("key", "e", 20), arg("codec", "C", 40), arg("completion", "autonomous", 60),
                               arg("ttl", "PT1H", 80), arg("transaction", "required", 100)}),
                    endpoint);
  REQUIRE(r.diagnostics.size() == 4);
  CHECK(r.diagnostics[0].message ==
        "'key' is not allowed on an HTTP endpoint: its key comes from the Idempotency-Key header");
  CHECK(r.diagnostics[0].position.column == 20);
  CHECK(r.diagnostics[1].message ==
        "'codec' is not allowed on an HTTP endpoint: the HTTP adapter stores and replays the response itself");
  CHECK(r.diagnostics[2].message ==
        "'completion' is not allowed on an HTTP endpoint: an HTTP endpoint always completes autonomously");
  CHECK(r.diagnostics[3].message ==
        "'transaction' is not allowed on an HTTP endpoint: its server's adapter calls it, and opens no transaction; "
        "begin one in the handler");
  CHECK(r.diagnostics[3].position.column == 100);
  // Without those, an endpoint needs no key: it comes from the header.
  CHECK(validate(attribute({arg("ttl", "PT1H")}), endpoint).ok());
}

TEST_CASE("an HTTP endpoint returns void and is refused in any other shape", "[annotator][validator]") {
  function_facts endpoint = member("int");
  endpoint.http_endpoint = true;
  const diagnostic non_void = only_error(validate(attribute({}), endpoint));
  CHECK(non_void.position.column == 11);
  CHECK(non_void.message == "'shop::OrderListener::on' is an HTTP endpoint and returns 'int': an endpoint answers "
                            "through its httplib::Response, which is what is stored and replayed; return void");
  // The scanner's reason why a function taking a Request or Response is no endpoint is an error.
  function_facts near_miss = member("void");
  near_miss.http_problem = "not an endpoint";
  CHECK(only_error(validate(attribute({arg("key", "event.id")}), near_miss)).message == "not an endpoint");
  // An endpoint gets no guarded<C> wrapper: noexcept and final, refused on other members, are fine.
  function_facts wrapped = member("void");
  wrapped.http_endpoint = true;
  wrapped.is_noexcept = true;
  wrapped.is_final = true;
  const validation_result r = validate(attribute({}), wrapped);
  REQUIRE(r.ok());
  CHECK(r.spec->scope == "OrderListener.on");
  CHECK(r.spec->key.empty());
  CHECK(r.spec->codec.empty());
}

TEST_CASE("functions that cannot be guarded", "[annotator][validator]") {
  function_facts f = member();
  f.is_pure = true;
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("is pure virtual") != std::string::npos);
  f = member();
  f.is_private = true;
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("is private") != std::string::npos);
  f = member();
  f.is_template = true;
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("template") != std::string::npos);
  f = member();
  f.is_special = true;
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("constructor") != std::string::npos);
  f = member("const shop::Receipt&");
  f.returns_reference = true;
  CHECK(only_error(validate(attribute({arg("key", "e"), arg("codec", "C")}), f)).message.find("returns a reference") !=
        std::string::npos);
  f = member();
  f.internal_linkage = true;
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("internal linkage") != std::string::npos);
  f = member();
  f.ref_qualifier = "&&";
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("'&&'-qualified") != std::string::npos);
}

TEST_CASE("what idem::guarded<C> cannot override or keep is refused", "[annotator][validator]") {
  function_facts f = member();
  f.is_noexcept = true;
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("std::terminate; remove noexcept") !=
        std::string::npos);
  f.class_is_final = true;  // only idem::invoke, which throws outside the function
  CHECK(validate(attribute({arg("key", "e")}), f).ok());
  f = member();
  f.kind = function_kind::free;
  f.is_noexcept = true;
  CHECK(validate(attribute({arg("key", "e")}), f).ok());
  f = member();
  f.is_protected = true;
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("is protected") != std::string::npos);
  f = member();
  f.is_private = true;
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("make it public") != std::string::npos);
  f = member();
  f.is_final = true;
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("is final") != std::string::npos);
  f.class_is_final = true;  // no guarded<C>: idem::invoke guards it
  CHECK(validate(attribute({arg("key", "e")}), f).ok());
  f = member();
  f.parameters.front().default_argument = "secret";
  f.parameters.front().default_private_member = "OrderListener::secret";
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("uses the private 'OrderListener::secret'") !=
        std::string::npos);
  f = member();
  f.non_public_overload = "on(int)";
  CHECK(only_error(validate(attribute({arg("key", "e")}), f)).message.find("non-public overload 'on(int)'") !=
        std::string::npos);
}

TEST_CASE("two functions sharing a scope must agree", "[annotator][validator]") {
  auto one = validate(attribute({arg("key", "e"), arg("scope", "Shared"), arg("ttl", "PT1H")}), member());
  function_facts other_facts = member();
  other_facts.qualified_name = "shop::Other::on";
  auto same = validate(attribute({arg("key", "e"), arg("scope", "Shared"), arg("ttl", "PT1H")}), other_facts);
  auto different = validate(attribute({arg("key", "e"), arg("scope", "Shared"), arg("ttl", "PT2H")}), other_facts);
  REQUIRE((one.ok() && same.ok() && different.ok()));
  CHECK(check_scope_conflicts({*one.spec, *same.spec}).empty());
  auto conflicts = check_scope_conflicts({*one.spec, *different.spec});
  REQUIRE(conflicts.size() == 2);
  CHECK(conflicts[0].message ==
        "scope \"Shared\" of 'shop::Other::on' is also the scope of 'shop::OrderListener::on' with different settings "
        "(ttl \"PT2H\" vs \"PT1H\"): a duplicate of one would be answered with the record of the other");
  CHECK(conflicts[1].level == severity::note);
}

TEST_CASE("an empty scope is the default scope and does not name one", "[annotator][validator]") {
  auto r = validate(attribute({arg("key", "e"), arg("scope", "")}), member());
  REQUIRE(r.ok());
  CHECK(r.spec->scope == "OrderListener.on");
  CHECK(r.spec->scope_is_default);
  CHECK(r.spec->scope_position == source_position{"t.hpp", 1, 38});  // the empty literal's opening quote
}

TEST_CASE("default scopes that coincide are an error even with the same settings", "[annotator][validator]") {
  function_facts other_facts = member();
  other_facts.qualified_name = "billing::OrderListener::on";  // same simple class, other namespace
  auto one = validate(attribute({arg("key", "e")}), member());
  auto other = validate(attribute({arg("key", "e")}), other_facts);
  auto named = validate(attribute({arg("key", "e"), arg("scope", "OrderListener.on")}), other_facts);
  auto named_differently = validate(attribute({arg("key", "e"), arg("scope", "OrderListener.on"), arg("ttl", "PT1H")}),
                                    other_facts);
  REQUIRE((one.ok() && other.ok() && named.ok() && named_differently.ok()));

  auto conflicts = check_scope_conflicts({*one.spec, *other.spec});
  REQUIRE(conflicts.size() == 2);
  CHECK(conflicts[0].level == severity::error);
  CHECK(conflicts[0].position == source_position{"t.hpp", 1, 11});  // the later attribute
  CHECK(conflicts[0].message ==
        "the default scope \"OrderListener.on\" of 'billing::OrderListener::on' is also the default scope of "
        "'shop::OrderListener::on': they would share records, so that after one runs for a key the other is skipped "
        "for that key; set scope = \"...\" on one of them");
  CHECK(conflicts[1].level == severity::note);
  CHECK(conflicts[1].message == "'shop::OrderListener::on' uses scope \"OrderListener.on\" here");

  CHECK(check_scope_conflicts({*one.spec, *named.spec}).empty());  // on purpose: one names the scope
  auto different = check_scope_conflicts({*one.spec, *named_differently.spec});
  REQUIRE(different.size() == 2);
  CHECK(different[0].message.find("with different settings (ttl \"PT1H\" vs the default)") != std::string::npos);
  CHECK(different[0].position == named_differently.spec->scope_position);
}

TEST_CASE("overloads in a scope conflict are named by their parameters", "[annotator][validator]") {
  function_facts by_event = member();
  by_event.is_overloaded = true;
  function_facts by_id = by_event;
  by_id.parameters = {make_parameter("long", "long", "id")};
  auto a = validate(attribute({arg("key", "event")}), by_event);
  auto b = validate(attribute({arg("key", "id")}), by_id);
  REQUIRE((a.ok() && b.ok()));
  auto conflicts = check_scope_conflicts({*a.spec, *b.spec});
  REQUIRE(conflicts.size() == 2);
  CHECK(conflicts[0].message.find("of 'shop::OrderListener::on(long)' is also the default scope of "
                                  "'shop::OrderListener::on(const shop::OrderPlaced&)'") != std::string::npos);
}
