// The one rule for functions sharing a scope (idem::detail::scope_sharing_problem), which both
// idem-annotate (within a header) and the engine's constructor (across headers) apply.
#include <catch2/catch.hpp>
#include <chrono>
#include <idem/errors.hpp>
#include <idem/policy_registry.hpp>
#include <string>
#include <vector>

namespace {

using idem::detail::scope_claim;
using idem::detail::scope_sharing_problem;
using namespace std::chrono_literals;

scope_claim claim(std::string_view function, std::string_view scope, bool scope_explicit) {
  return scope_claim{.function = function,
                     .scope = scope,
                     .scope_explicit = scope_explicit,
                     .options = {},
                     .codec = "",
                     .result_type = "void",
                     .http_endpoint = false,
                     .where = {}};
}

}  // namespace

TEST_CASE("scope sharing: two default scopes that coincide never share, whatever their settings", "[unit][policy]") {
  const scope_claim billing = claim("billing::handle", "handle", false);
  const scope_claim mailing = claim("mailing::handle", "handle", false);
  CHECK(scope_sharing_problem(billing, mailing) ==
        "the default scope \"handle\" of 'mailing::handle' is also the default scope of 'billing::handle': they would "
        "share records, so that after one runs for a key the other is skipped for that key; set scope = \"...\" on one "
        "of them");
  CHECK_FALSE(scope_sharing_problem(mailing, billing).empty());
  scope_claim other = mailing;
  other.scope = "mailing.handle";
  CHECK(scope_sharing_problem(billing, other).empty());  // different scopes never conflict
}

TEST_CASE("scope sharing: one explicit scope makes sharing possible, in either order", "[unit][policy]") {
  const scope_claim original = claim("OrderListener::on", "OrderListener.on", false);
  const scope_claim renamed = claim("OrderListener::on_v2", "OrderListener.on", true);
  CHECK(scope_sharing_problem(original, renamed).empty());
  CHECK(scope_sharing_problem(renamed, original).empty());
  CHECK(scope_sharing_problem(renamed, renamed).empty());  // both explicit
}

TEST_CASE("scope sharing: a shared scope needs the same settings, codec and return type", "[unit][policy]") {
  const scope_claim a = claim("A::on", "Shared", true);
  auto problem_with = [&](auto change) {
    scope_claim b = claim("B::on", "Shared", false);
    change(b);
    return scope_sharing_problem(a, b);
  };
  const std::string prefix = "scope \"Shared\" of 'B::on' is also the scope of 'A::on' with different settings (";
  const std::string suffix = "): a duplicate of one would be answered with the record of the other";
  CHECK(problem_with([](scope_claim&) {}).empty());
  CHECK(problem_with([](scope_claim& b) { b.options.ttl = 1h; }) == prefix + "ttl \"PT1H\" vs the default" + suffix);
  CHECK(problem_with([](scope_claim& b) { b.options.lease = 1min; }) ==
        prefix + "lease \"PT1M\" vs the default" + suffix);
  CHECK(problem_with([](scope_claim& b) { b.options.wait = 0ms; }) ==
        prefix + "waitTimeout \"PT0S\" vs the default" + suffix);
  CHECK(problem_with([](scope_claim& b) { b.options.completion = idem::completion_mode::join_transaction; }) ==
        prefix + "completion \"join-transaction\" vs the default" + suffix);
  CHECK(problem_with([](scope_claim& b) {
          b.result_type = "Receipt";
          b.codec = "idem::json_codec";
        }) == prefix + "return type 'Receipt' vs 'void'" + suffix);
  scope_claim valued = a;
  valued.result_type = "Receipt";
  valued.codec = "idem::json_codec";
  scope_claim other_codec = claim("B::settle", "Shared", false);
  other_codec.result_type = "Receipt";
  other_codec.codec = "ReceiptCodec";
  CHECK(scope_sharing_problem(valued, other_codec) ==
        "scope \"Shared\" of 'B::settle' is also the scope of 'A::on' with different settings (codec \"ReceiptCodec\" "
        "vs \"idem::json_codec\"" +
            suffix);
  other_codec.codec = valued.codec;
  CHECK(scope_sharing_problem(valued, other_codec).empty());
}

TEST_CASE("scope sharing: two HTTP endpoints store the response, whichever server's signature they have",
          "[unit][policy]") {
  scope_claim httplib_endpoint = claim("PaymentController::create", "PaymentController.create", false);
  httplib_endpoint.http_endpoint = true;
  scope_claim beast_endpoint = claim("BeastPayments::create", "PaymentController.create", true);
  beast_endpoint.http_endpoint = true;
  beast_endpoint.result_type = "boost::asio::awaitable<response_type>";
  CHECK(scope_sharing_problem(httplib_endpoint, beast_endpoint).empty());
  CHECK(scope_sharing_problem(beast_endpoint, httplib_endpoint).empty());
  // A void function shares no record with an endpoint: it stores nothing, the endpoint a response.
  const scope_claim job = claim("Jobs::create", "PaymentController.create", true);
  const std::string problem = scope_sharing_problem(httplib_endpoint, job);
  CHECK(problem.find("(return type 'void' vs an HTTP endpoint)") != std::string::npos);
  CHECK(scope_sharing_problem(job, httplib_endpoint).find("(an HTTP endpoint vs return type 'void')") !=
        std::string::npos);
  beast_endpoint.options.wait = std::chrono::milliseconds(0);
  CHECK(scope_sharing_problem(httplib_endpoint, beast_endpoint).find("waitTimeout") != std::string::npos);
}

TEST_CASE("scope sharing: locations are shown when given", "[unit][policy]") {
  scope_claim a = claim("billing::handle", "handle", false);
  scope_claim b = claim("mailing::handle", "handle", false);
  a.where = "billing.hpp:3:9";
  b.where = "mailing.hpp:5:9";
  const std::string problem = scope_sharing_problem(a, b);
  CHECK(problem.find("of 'mailing::handle' (mailing.hpp:5:9) is also the default scope of 'billing::handle' "
                     "(billing.hpp:3:9)") != std::string::npos);
}

TEST_CASE("scope conflicts: each later claim against every earlier one of its scope", "[unit][policy]") {
  const std::vector<scope_claim> claims{
      claim("orders::refund", "refund", false),    // 0
      claim("orders::refund_v2", "refund", true),  // 1: shares with 0 on purpose
      claim("other::run", "run", false),           // 2
      claim("archive::refund", "refund", false),   // 3: fine with 1, but collides with 0
  };
  const auto conflicts = idem::detail::scope_conflicts(claims);
  REQUIRE(conflicts.size() == 1);
  CHECK(conflicts[0].earlier == 0);
  CHECK(conflicts[0].later == 3);
  CHECK(conflicts[0].message == scope_sharing_problem(claims[0], claims[3]));
}

TEST_CASE("check_shared_scopes: registered policies, named with their locations", "[unit][policy]") {
  using idem::detail::policy_info;
  const policy_info billing{
      .function = "billing::handle", .scope = "handle", .file = "billing.hpp", .line = 3, .column = 9};
  policy_info mailing = billing;
  mailing.function = "mailing::handle";
  mailing.file = "mailing.hpp";
  mailing.line = 5;
  CHECK_THROWS_AS(idem::detail::check_shared_scopes({billing, mailing}), idem::configuration_error);
  CHECK_THROWS_WITH(idem::detail::check_shared_scopes({billing, mailing}),
                    Catch::Contains("'mailing::handle' (mailing.hpp:5:9)") &&
                        Catch::Contains("'billing::handle' (billing.hpp:3:9)") &&
                        Catch::Contains("set scope = \"...\" on one of them"));
  mailing.scope_explicit = true;
  CHECK_NOTHROW(idem::detail::check_shared_scopes({billing, mailing}));
  // The same function registered twice (two shared libraries carrying one generated source) is one
  // function, not a collision.
  CHECK_NOTHROW(idem::detail::check_shared_scopes({billing, billing}));
}
