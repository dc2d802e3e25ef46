// The emitter without Clang: what the generated code says about a spec.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "emitter.hpp"

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

function_spec settle_spec() {
  function_spec s;
  s.facts.kind = function_kind::member;
  s.facts.qualified_name = "shop::OrderListener::settle";
  s.facts.name = "settle";
  s.facts.simple_class = "OrderListener";
  s.facts.qualified_class = "shop::OrderListener";
  s.facts.return_type = "shop::Receipt";
  s.facts.returns_void = false;
  s.facts.is_virtual = true;
  s.facts.namespace_open = "namespace shop { ";
  s.facts.namespace_close = "} ";
  s.facts.namespace_name = "shop";
  s.facts.pointer_type = "shop::Receipt (shop::OrderListener::*)(const shop::SettleCommand&)";
  s.facts.parameters.push_back(make_parameter("const shop::SettleCommand&", "const shop::SettleCommand&", "cmd"));
  s.position = {"orders.hpp", 12, 5};
  s.scope = "OrderListener.settle";
  s.key = "cmd.id";
  s.key_position = {"orders.hpp", 12, 30};
  s.codec = "ReceiptCodec";
  s.codec_position = {"orders.hpp", 12, 60};
  s.options.ttl = 24h;
  return s;
}

emit_options options() {
  emit_options o;
  o.source_path = "orders.hpp";
  o.include_as = "orders.hpp";
  o.header_name = "orders.idem.hpp";
  return o;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a policy specialisation per function, keyed by its address", "[annotator][emitter]") {
  const generated_files files = emit({settle_spec()}, options());
  CHECK(contains(files.header, "struct policy<&::shop::OrderListener::settle> {"));
  CHECK(contains(files.header, "static constexpr ::std::string_view scope = \"OrderListener.settle\";"));
  CHECK(contains(files.header, "options.ttl = ::std::chrono::milliseconds{86400000};"));
  CHECK(contains(files.header, "using codec = ::shop::idem_generated::OrderListener_settle_codec;"));
  // The key expression sits under #line at the attribute's column.
  CHECK(contains(files.header, "#line 12 \"orders.hpp\"\n  return ::idem::to_key(     cmd.id);\n"));
}

TEST_CASE("a guarded class overrides virtual methods and calls the base by its qualified name",
          "[annotator][emitter]") {
  const generated_files files = emit({settle_spec()}, options());
  CHECK(contains(files.header, "class guarded<::shop::OrderListener> : public ::shop::OrderListener {"));
  CHECK(contains(files.header, "shop::Receipt settle(const shop::SettleCommand& cmd) override {"));
  CHECK(contains(files.header, "this->::shop::OrderListener::settle("));
}

TEST_CASE("overloaded functions are named through their exact pointer type", "[annotator][emitter]") {
  function_spec s = settle_spec();
  s.facts.is_overloaded = true;
  CHECK(function_pointer_expression(s.facts) ==
        "static_cast<shop::Receipt (shop::OrderListener::*)(const shop::SettleCommand&)>(&::shop::OrderListener::settle)");
}

TEST_CASE("the source registers every policy, and the manifest lists it", "[annotator][emitter]") {
  const generated_files files = emit({settle_spec()}, options());
  CHECK(contains(files.source, "const bool policy<&::shop::OrderListener::settle>::registered = "
                               "::idem::register_policy(::idem::policy_info{"));
  const auto manifest = nlohmann::json::parse(files.manifest);
  REQUIRE(manifest["functions"].size() == 1);
  const auto& f = manifest["functions"][0];
  CHECK(f["function"] == "shop::OrderListener::settle");
  CHECK(f["scope"] == "OrderListener.settle");
  CHECK(f["kind"] == "virtual member");
  CHECK(f["ttl"] == "P1D");  // idem::format_duration's canonical form of 24 h
  CHECK(f["lease"] == "");
  CHECK(f["location"]["line"] == 12);
}

TEST_CASE("the registration says whether the scope was named, and the codec and result type",
          "[annotator][emitter]") {
  function_spec named = settle_spec();
  named.scope = "Orders.settle";
  named.scope_is_default = false;
  const generated_files files = emit({settle_spec(), named}, options());
  // The default one first, then the named one: the engine's startup check tells them apart.
  const auto first = files.source.find(".scope_explicit = false,");
  const auto second = files.source.find(".scope_explicit = true,");
  REQUIRE(first != std::string::npos);
  REQUIRE(second != std::string::npos);
  CHECK(first < second);
  CHECK(contains(files.source, "    .codec = \"ReceiptCodec\",\n    .result_type = \"shop::Receipt\",\n"));
  const auto manifest = nlohmann::json::parse(files.manifest);
  CHECK(manifest["functions"][0]["scope_explicit"] == false);
  CHECK(manifest["functions"][1]["scope_explicit"] == true);
}

TEST_CASE("a guarded class keeps every overload and the default arguments, and qualifies idem's names",
          "[annotator][emitter]") {
  function_spec s = settle_spec();
  parameter urgent = make_parameter("bool", "const bool&", "urgent");
  urgent.default_argument = "false";
  urgent.default_position = {"orders.hpp", 12, 80};
  urgent.default_type = "bool";
  s.facts.parameters.push_back(urgent);
  const generated_files files = emit({s}, options());
  CHECK(contains(files.header, "  using ::shop::OrderListener::settle;\n"));
  CHECK(contains(files.header, "bool urgent = ::idem::policy<&::shop::OrderListener::settle>::default_argument_1()"));
  CHECK(contains(files.header, "struct OrderListener_settle_defaults : ::shop::OrderListener {"));
  CHECK(contains(files.header, "return ::idem::run_guarded<&::shop::OrderListener::settle>("));
  CHECK_FALSE(contains(files.header, "detail::"));
  CHECK_FALSE(contains(files.source, "detail::"));
}

TEST_CASE("a method annotated transaction = required is data in its policy, and its class takes a source",
          "[annotator][emitter]") {
  function_spec s = settle_spec();
  s.transaction = idem::transaction_demand::required;
  const generated_files files = emit({s}, options());
  CHECK(contains(files.header,
                 "  static constexpr ::idem::transaction_demand transaction = ::idem::transaction_demand::required;\n"));
  CHECK(contains(files.header, "::idem::needs_transaction_source<&::shop::OrderListener::settle>;"));
  CHECK(contains(files.header, "explicit guarded(::idem::engine& idem_engine, ::idem::transaction_source& "
                               "idem_transactions, Args&&... args)"));
  CHECK(contains(files.header, "::idem::check_without_transaction_source<idem_needs_transactions, Args...>();"));
  CHECK(contains(files.header, "idem_engine_, idem_transactions_, [&]()"));
  CHECK(nlohmann::json::parse(files.manifest)["functions"][0]["transaction"] == "required");
  CHECK_FALSE(contains(files.header, "detail::"));
  // Unset, the policy says nothing and the runtime's default (caller) applies.
  CHECK_FALSE(contains(emit({settle_spec()}, options()).header, "transaction_demand"));
}

TEST_CASE("helpers of two nested classes of one name in one namespace do not collide", "[annotator][emitter]") {
  function_spec a = settle_spec();
  a.facts.qualified_class = "shop::A::Handler";
  a.facts.qualified_name = "shop::A::Handler::settle";
  a.facts.simple_class = "Handler";
  a.facts.class_path = "A_Handler";
  a.scope = "A.settle";
  function_spec b = a;
  b.facts.qualified_class = "shop::B::Handler";
  b.facts.qualified_name = "shop::B::Handler::settle";
  b.facts.class_path = "B_Handler";
  b.scope = "B.settle";
  const generated_files files = emit({a, b}, options());
  CHECK(contains(files.header, "inline ::std::string A_Handler_settle_key("));
  CHECK(contains(files.header, "inline ::std::string B_Handler_settle_key("));
  // Without the class path the two would be one name: then the index tells them apart.
  a.facts.class_path.clear();
  b.facts.class_path.clear();
  const generated_files same = emit({a, b}, options());
  CHECK(contains(same.header, "inline ::std::string Handler_settle_0_key("));
  CHECK(contains(same.header, "inline ::std::string Handler_settle_1_key("));
}

TEST_CASE("an HTTP endpoint gets a policy without key or codec and no guarded override", "[annotator][emitter]") {
  function_spec pay;
  pay.facts.kind = function_kind::member;
  pay.facts.qualified_name = "shop::Checkout::pay";
  pay.facts.name = "pay";
  pay.facts.simple_class = "Checkout";
  pay.facts.qualified_class = "shop::Checkout";
  pay.facts.return_type = "void";
  pay.facts.http_endpoint = true;
  pay.facts.namespace_open = "namespace shop { ";
  pay.facts.namespace_close = "} ";
  pay.facts.namespace_name = "shop";
  pay.facts.parameters.push_back(make_parameter("const httplib::Request&", "const httplib::Request&", "req"));
  pay.facts.parameters.push_back(make_parameter("httplib::Response&", "httplib::Response&", "res"));
  pay.position = {"checkout.hpp", 9, 5};
  pay.scope = "Checkout.pay";
  pay.options.wait = 0ms;

  const generated_files only_endpoint = emit({pay}, options());
  CHECK(contains(only_endpoint.header, "struct policy<&::shop::Checkout::pay> {"));
  CHECK(contains(only_endpoint.header, "static constexpr bool http_endpoint = true;"));
  CHECK(contains(only_endpoint.header, "options.wait = ::std::chrono::milliseconds{0};"));
  CHECK_FALSE(contains(only_endpoint.header, "key("));
  CHECK_FALSE(contains(only_endpoint.header, "codec"));
  CHECK_FALSE(contains(only_endpoint.header, "idem_generated"));
  CHECK_FALSE(contains(only_endpoint.header, "class guarded<"));
  CHECK(contains(only_endpoint.source, ".result_type = \"void\","));
  CHECK(contains(only_endpoint.source, ".codec = \"\","));
  CHECK(nlohmann::json::parse(only_endpoint.manifest)["functions"][0]["http_endpoint"] == true);

  // Next to an ordinary method of the same class: guarded<C> wraps that one only.
  function_spec archive = settle_spec();
  archive.facts.qualified_name = "shop::Checkout::archive";
  archive.facts.name = "archive";
  archive.facts.simple_class = "Checkout";
  archive.facts.qualified_class = "shop::Checkout";
  archive.facts.pointer_type.clear();
  const generated_files both = emit({pay, archive}, options());
  CHECK(contains(both.header, "class guarded<::shop::Checkout>"));
  CHECK(contains(both.header, "using ::shop::Checkout::archive;"));
  CHECK_FALSE(contains(both.header, "using ::shop::Checkout::pay;"));
  CHECK_FALSE(contains(both.header, "run_guarded<&::shop::Checkout::pay>"));
}
