// idem-admin — an operator's command for idem's stores: look at a record, list records, free a
// stuck one, purge, count. docs/operations.md is its runbook.
//
//   idem-admin --store SPEC [--json] inspect SCOPE KEY [--payload]
//   idem-admin --store SPEC [--json] list [--scope S] [--state in-progress|completed] [--older-than PT5M] [--limit N]
//   idem-admin --store SPEC [--json] release SCOPE KEY [--force]
//   idem-admin --store SPEC [--json] purge
//   idem-admin --store SPEC [--json] stats
//
// --store and --json may also follow the subcommand and its arguments.
//
// The key is client data: it is hashed the way the library hashes it and never printed back;
// records print as Scope/#xxxxxxxx. A conninfo's password never appears in output or errors.
#include <CLI/CLI.hpp>

#include <idem/duration.hpp>
#include <idem/errors.hpp>
#include <idem/identity.hpp>
#include <idem/store.hpp>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "commands.hpp"
#include "store_spec.hpp"

namespace {

constexpr const char* exit_codes =
    "Exit codes:\n"
    "  0  done\n"
    "  1  not found (inspect, release: no such record)\n"
    "  2  usage (bad arguments, an invalid scope or key, a store this build cannot open)\n"
    "  3  store unreachable (or it answered with an error, or holds a record idem cannot read)\n"
    "  4  refused (release: the lease is live and --force was not given, or the record is complete)\n";

}  // namespace

int main(int argc, char** argv) {
  using idem::admin::exit_code;
  CLI::App app{"idem-admin: inspect, list, release and purge idem's idempotency records"};
  app.footer(std::string(exit_codes) + "\nStores: --store " + idem::admin::store_spec_choices());
  app.require_subcommand(1);
  // Global options after the subcommand too (`idem-admin inspect S K --store X --json`), as git and
  // kubectl take them. Set before the subcommands are added: they inherit it.
  app.fallthrough();
  std::string spec;
  bool json = false;
  app.add_option("--store", spec, "the store: " + idem::admin::store_spec_choices())->required();
  app.add_flag("--json", json, "machine-readable output (one JSON document)");

  idem::admin::request request;
  auto* inspect = app.add_subcommand("inspect", "show one record (never its payload unless --payload)");
  inspect->add_option("scope", request.scope, "the record's scope")->required();
  inspect->add_option("key", request.key, "the record's key (hashed, never printed)")->required();
  inspect->add_flag("--payload", request.with_payload, "also print the stored payload");

  auto* list = app.add_subcommand("list", "list records, oldest first");
  std::optional<std::string> state_text, older_text;
  list->add_option("--scope", request.query.scope, "only this scope");
  list->add_option("--state", state_text, "only in-progress or completed records")
      ->check(CLI::IsMember({"in-progress", "completed"}));
  list->add_option("--older-than", older_text, "only records created at least this long ago (ISO-8601, e.g. PT5M)");
  list->add_option("--limit", request.query.limit, "at most this many (1..10000, default 100)");

  auto* release = app.add_subcommand("release", "free an in-progress record whose lease has lapsed");
  release->add_option("scope", request.scope, "the record's scope")->required();
  release->add_option("key", request.key, "the record's key (hashed, never printed)")->required();
  release->add_flag("--force", request.force,
                    "end a live lease too: its holder's completion is then refused (lease lost), never recorded");

  app.add_subcommand("purge", "delete every expired record nobody holds");
  app.add_subcommand("stats", "count records by state");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? app.exit(e) : (app.exit(e), static_cast<int>(exit_code::usage));
  }

  std::string command = app.get_subcommands().front()->get_name();
  try {
    if (state_text)
      request.query.state = *state_text == "in-progress" ? idem::record_state::in_progress : idem::record_state::completed;
    if (older_text) request.query.older_than = idem::parse_duration_or_throw(*older_text, "--older-than");
    const idem::admin::outcome result = idem::admin::run(command, request, spec, json);
    std::cout << result.output;
    if (!result.error.empty()) std::cerr << "idem-admin: " << result.error << "\n";
    return static_cast<int>(result.code);
  } catch (const std::exception& e) {
    // Only configuration mistakes reach here (run reports store failures itself).
    std::cerr << "idem-admin: " << idem::admin::without_secrets(e.what(), spec) << "\n";
    return static_cast<int>(exit_code::usage);
  }
}
