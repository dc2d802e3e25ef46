// runtime/redis/scripts.cpp — digests the embedded scripts once.
#include "scripts.hpp"

#include "sha1.hpp"

namespace idem::detail::redis {
namespace {

script make(std::string_view name, std::string_view source) {
  return script{name, source, sha1_hex(source)};
}

}  // namespace

const script_set& scripts() {
  static const script_set set{
      make("acquire", acquire_source), make("complete", complete_source), make("release", release_source),
      make("extend", extend_source),   make("purge", purge_source),
      make("admin_read", admin_read_source), make("admin_release", admin_release_source),
  };
  return set;
}

}  // namespace idem::detail::redis
