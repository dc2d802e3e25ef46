// idem/config.hpp — engine-wide defaults, from code or from a JSON file.
#pragma once

#include <chrono>
#include <filesystem>
#include <string_view>

#include <idem/context.hpp>

namespace idem {

// What the engine does when the action succeeded but its record could not be written
// (the codec threw, or the store refused the completion).
enum class completion_failure_policy {
  propagate,       // rethrow the completion's exception to the caller
  log_and_return,  // report it through the log sink and return the action's result
};
std::string_view to_string(completion_failure_policy policy) noexcept;

// idem::config
//
// Defaults for every call that does not set its own. An aggregate with the defaults below;
// validate() (run by the engine's constructor) throws configuration_error naming the field, the
// value and the fix.
struct config {
  std::chrono::milliseconds default_ttl = std::chrono::hours(24);    // replay window, >= 1 ms
  std::chrono::milliseconds default_lease = std::chrono::seconds(30);  // >= 2 ms; heartbeat at half
  std::chrono::milliseconds default_wait = std::chrono::seconds(10);   // >= 0; 0 = never block
  completion_mode default_completion = completion_mode::autonomous;
  completion_failure_policy failure_policy = completion_failure_policy::propagate;
  // How often the engine deletes the store's expired records (store::purge_expired) on a
  // thread of its own, first one interval after construction; zero turns it off (then call
  // purge_expired yourself). >= 0. Without it the embedded memory store would grow forever.
  std::chrono::milliseconds purge_interval = std::chrono::hours(1);

  void validate() const;

  // Reads a JSON object whose members are all optional:
  //   {"default_ttl": "PT24H", "default_lease": "PT30S", "default_wait": "PT10S",
  //    "default_completion": "autonomous", "failure_policy": "propagate", "purge_interval": "PT1H"}
  // Durations are ISO-8601 strings. An unknown member, a value of the wrong type or an invalid
  // value throws configuration_error naming the member. The result is validated.
  static config from_json(std::string_view json_text);
  // Reads the file and calls from_json; an unreadable file throws configuration_error naming it.
  static config from_json_file(const std::filesystem::path& path);
};

}  // namespace idem
