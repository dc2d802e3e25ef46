// runtime/redis/scripts.hpp — the Lua scripts of the Redis store and their SHA-1 digests.
#pragma once

#include <string>
#include <string_view>

namespace idem::detail::redis {

// Sources embedded at build time from runtime/redis/lua/: <name>.lua with the helpers of common.lua it
// uses (lua/expand.cmake).
extern const std::string_view acquire_source;
extern const std::string_view complete_source;
extern const std::string_view release_source;
extern const std::string_view extend_source;
extern const std::string_view purge_source;
extern const std::string_view admin_read_source;
extern const std::string_view admin_release_source;

// One script: its name for messages, its source (sent with EVAL after NOSCRIPT) and its SHA-1
// (sent with EVALSHA).
struct script {
  std::string_view name;
  std::string_view source;
  std::string sha;
};

// The store's scripts, digested once per process.
struct script_set {
  script acquire;
  script complete;
  script release;
  script extend;
  script purge;
  script admin_read;     // idem-admin's look at a record
  script admin_release;  // idem-admin's release
};
const script_set& scripts();

}  // namespace idem::detail::redis
