// admin/store_spec.cpp — opening a store from its `--store` spelling.
#include "store_spec.hpp"

#include <idem/errors.hpp>
#include <idem/memory_store.hpp>
#ifdef IDEM_ADMIN_WITH_SQLITE
#include <idem/sqlite_store.hpp>
#endif
#ifdef IDEM_ADMIN_WITH_POSTGRES
#include <idem/postgres_store.hpp>
#endif
#ifdef IDEM_ADMIN_WITH_REDIS
#include <idem/redis_store.hpp>
#endif

#include <charconv>
#include <regex>
#include <tuple>
#include <vector>

namespace idem::admin {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

[[maybe_unused]] std::pair<std::string, int> host_port(std::string_view address, std::string_view kind) {
  const auto colon = address.rfind(':');
  int port = 0;
  if (colon == std::string_view::npos || colon == 0 ||
      std::from_chars(address.data() + colon + 1, address.data() + address.size(), port).ptr !=
          address.data() + address.size() ||
      port < 1 || port > 65535)
    throw configuration_error(std::string("--store ") + std::string(kind) + ":HOST:PORT needs a host and a port 1..65535");
  return {std::string(address.substr(0, colon)), port};
}

}  // namespace

std::string store_spec_choices() {
  std::string choices = "memory";
#ifdef IDEM_ADMIN_WITH_SQLITE
  choices += " | sqlite:PATH";
#endif
#ifdef IDEM_ADMIN_WITH_POSTGRES
  choices += " | postgres:CONNINFO";
#endif
#ifdef IDEM_ADMIN_WITH_REDIS
  choices += " | redis:HOST:PORT | redis-cluster:HOST:PORT[,HOST:PORT...]";
#endif
  return choices;
}

std::unique_ptr<store> open_store(std::string_view spec, [[maybe_unused]] const store_opening& how) {
  if (spec == "memory") return std::make_unique<memory_store>();
#ifdef IDEM_ADMIN_WITH_SQLITE
  if (starts_with(spec, "sqlite:")) {
    if (spec.size() == 7) throw configuration_error("--store sqlite:PATH needs a path");
    return std::make_unique<sqlite_store>(std::filesystem::path(std::string(spec.substr(7))));
  }
#endif
#ifdef IDEM_ADMIN_WITH_POSTGRES
  if (starts_with(spec, "postgres:")) {
    postgres_store_options o;
    o.conninfo = std::string(spec.substr(9));
    o.event_loop = how.event_loop;
    auto s = std::make_unique<postgres_store>(o);
    if (how.create_schema) s->create_schema();
    return s;
  }
#endif
#ifdef IDEM_ADMIN_WITH_REDIS
  if (starts_with(spec, "redis:")) {
    redis_store_options o;
    std::tie(o.host, o.port) = host_port(spec.substr(6), "redis");
    o.event_loop = how.event_loop;
    return std::make_unique<redis_store>(o);
  }
  if (starts_with(spec, "redis-cluster:")) {
    std::vector<std::string> nodes;
    std::string_view rest = spec.substr(14);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      nodes.emplace_back(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    if (nodes.empty()) throw configuration_error("--store redis-cluster:HOST:PORT[,HOST:PORT...] needs a node");
    for (const std::string& node : nodes) (void)host_port(node, "redis-cluster");
    redis_store_options o;
    std::tie(o.host, o.port) = host_port(nodes.front(), "redis-cluster");
    o.cluster.enabled = true;
    o.cluster.seeds.assign(nodes.begin() + 1, nodes.end());
    o.event_loop = how.event_loop;
    return std::make_unique<redis_store>(o);
  }
#endif
  const std::string kind(spec.substr(0, spec.find(':')));
  throw configuration_error("unknown store \"" + kind + "\"; --store takes " + store_spec_choices());
}

std::string without_secrets(std::string message, std::string_view spec) {
  static const std::regex patterns[] = {
      std::regex(R"(password\s*=\s*'((?:[^'\\]|\\.)*)')", std::regex::icase),  // password='sec ret'
      std::regex(R"(password\s*=\s*([^\s'&]+))", std::regex::icase),           // password=secret, ?password=secret
      std::regex(R"(://[^:/@]*:([^@/]+)@)"),                                     // scheme://user:secret@host
  };
  const std::string text(spec);
  for (const std::regex& pattern : patterns)
    for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator(); ++it) {
      const std::string secret = (*it)[1].str();
      if (secret.empty()) continue;
      for (std::size_t at = message.find(secret); at != std::string::npos; at = message.find(secret, at + 3))
        message.replace(at, secret.size(), "***");
    }
  return message;
}

}  // namespace idem::admin
