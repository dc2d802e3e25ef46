// admin/store_spec.hpp — the `--store` spelling shared by idem-admin and the payments sample:
// memory | sqlite:PATH | postgres:CONNINFO | redis:HOST:PORT | redis-cluster:HOST:PORT[,HOST:PORT...]
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <idem/event_loop.hpp>
#include <idem/store.hpp>

namespace idem::admin {

// What this build can open, for usage text: "memory | sqlite:PATH | ...".
std::string store_spec_choices();

// How open_store opens a store.
struct store_opening {
  // PostgreSQL: create the schema if it is missing.
  bool create_schema = false;
  // PostgreSQL and Redis: where asynchronous calls wait and read replies (their options'
  // `event_loop`; for coroutines, idem::asio::event_loop on the caller's io_context). Empty: the
  // store's own thread. The other stores have no loop and ignore it.
  std::shared_ptr<idem::event_loop> event_loop = nullptr;
};

// Opens the store `spec` names. Throws configuration_error for a spec this build cannot open or a
// malformed one (the message never repeats a conninfo), and the store's own errors
// (store_unavailable_error) when it cannot be reached.
std::unique_ptr<store> open_store(std::string_view spec, const store_opening& how = {});

// `message` with every password that `spec` carries (a conninfo's `password=`, keyword or URI
// parameter, or a URI's user:password@) replaced by "***": what an error may print.
std::string without_secrets(std::string message, std::string_view spec);

}  // namespace idem::admin
