// admin/commands.hpp — idem-admin's subcommands, apart from argument parsing: what each does to
// the store and what it prints, as a human table or as JSON.
#pragma once

#include <string>

#include <idem/store_admin.hpp>

namespace idem::admin {

// The documented exit codes (idem-admin --help, docs/operations.md).
enum class exit_code : int { done = 0, not_found = 1, usage = 2, unreachable = 3, refused = 4 };

struct request {
  std::string scope;
  std::string key;  // client data: hashed, never printed
  bool with_payload = false;
  bool force = false;
  record_query query;
};

struct outcome {
  exit_code code = exit_code::done;
  std::string output;  // for stdout
  std::string error;   // for stderr, empty when none; never holds the key or a password
};

// Runs `command` (inspect, list, release, purge, stats) on the store `spec` names. Every failure
// is an outcome, not an exception, except a programming error.
outcome run(const std::string& command, const request& r, const std::string& spec, bool json);

}  // namespace idem::admin
