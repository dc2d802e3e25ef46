// admin/store_spec.hpp — the `--store` spelling shared by idem-admin and the payments sample:
// memory | sqlite:PATH | postgres:CONNINFO | redis:HOST:PORT | redis-cluster:HOST:PORT[,HOST:PORT...]
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <idem/store.hpp>

namespace idem::admin {

// What this build can open, for usage text: "memory | sqlite:PATH | ...".
std::string store_spec_choices();

// Opens the store `spec` names (postgres: also creates the schema when `create_schema`). Throws
// configuration_error for a spec this build cannot open or a malformed one (the message never
// repeats a conninfo), and the store's own errors (store_unavailable_error) when it cannot be reached.
std::unique_ptr<store> open_store(std::string_view spec, bool create_schema = false);

// `message` with every password that `spec` carries (a conninfo's `password=`, keyword or URI
// parameter, or a URI's user:password@) replaced by "***": what an error may print.
std::string without_secrets(std::string message, std::string_view spec);

}  // namespace idem::admin
