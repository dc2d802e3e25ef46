// admin/commands.cpp — idem-admin's subcommands.
#include "commands.hpp"

#include <idem/errors.hpp>
#include <idem/identity.hpp>
#include <idem/store.hpp>

#include <ctime>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store_spec.hpp"

namespace idem::admin {

namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;
using json_value = nlohmann::ordered_json;

// ISO 8601 in UTC with milliseconds: 2026-12-02T19:55:01.123Z.
std::string timestamp(system_clock::time_point t) {
  const auto ms = std::chrono::floor<milliseconds>(t).time_since_epoch().count();
  const std::time_t seconds = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:03}Z", text, ((ms % 1000) + 1000) % 1000);
}

std::int64_t ms_between(system_clock::time_point from, system_clock::time_point to) {
  return std::chrono::duration_cast<milliseconds>(to - from).count();
}

std::string seconds_text(std::int64_t ms) { return fmt::format("{:.3f} s", static_cast<double>(ms) / 1000.0); }

// The lease, for people: "live, 12.345 s left" or "lapsed 3.000 s ago".
std::string lease_text(const record_summary& r) {
  if (r.state != record_state::in_progress || !r.lease_expires_at) return "-";
  const std::int64_t left = ms_between(r.read_at, *r.lease_expires_at);
  return left > 0 ? "live, " + seconds_text(left) + " left" : "lapsed " + seconds_text(-left) + " ago";
}

json_value to_json(const record_summary& r) {
  json_value j;
  j["record"] = r.to_string();
  j["scope"] = r.scope;
  j["state"] = to_string(r.state);
  j["created_at"] = timestamp(r.created_at);
  j["expires_at"] = timestamp(r.expires_at);
  if (r.lease_expires_at) {
    j["lease_expires_at"] = timestamp(*r.lease_expires_at);
    j["lease_remaining_ms"] = std::max<std::int64_t>(ms_between(r.read_at, *r.lease_expires_at), 0);
    j["lease_lapsed"] = r.lease_lapsed();
  }
  if (r.completed_at) j["completed_at"] = timestamp(*r.completed_at);
  if (r.state == record_state::completed) {
    j["payload_type"] = r.payload_type;
    j["payload_size"] = r.payload_size;
  }
  j["fingerprint"] = r.has_fingerprint;
  if (r.value) {
    json_value attributes = json_value::object();
    for (const auto& [name, value] : r.value->attributes) attributes[name] = value;
    j["payload"] = {{"type", r.value->type}, {"body", r.value->body}, {"attributes", attributes}};
  }
  return j;
}

// Bytes that may not be UTF-8 (a payload's body) as one JSON string, invalid sequences replaced.
std::string quoted(const std::string& bytes) {
  return json_value(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump(const json_value& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"; }

std::string describe(const record_summary& r) {
  std::string out;
  auto line = [&](std::string_view name, const std::string& value) { out += fmt::format("{:<12} {}\n", name, value); };
  line("record", r.to_string());
  line("state", std::string(to_string(r.state)));
  if (r.state == record_state::in_progress) line("lease", lease_text(r));
  line("created", timestamp(r.created_at));
  if (r.completed_at) line("completed", timestamp(*r.completed_at));
  line("expires", timestamp(r.expires_at) + (r.expires_at <= r.read_at ? " (expired)" : ""));
  if (r.state == record_state::completed) line("payload", fmt::format("{}, {} bytes", r.payload_type, r.payload_size));
  line("fingerprint", r.has_fingerprint ? "yes" : "no");
  if (r.value) {
    line("body", quoted(r.value->body));
    for (const auto& [name, value] : r.value->attributes) line("attribute", quoted(name) + " = " + quoted(value));
  }
  return out;
}

std::string table(const std::vector<record_summary>& records) {
  std::string out = fmt::format("{:<48} {:<12} {:<25} {:<26} {}\n", "RECORD", "STATE", "CREATED", "LEASE", "EXPIRES");
  for (const record_summary& r : records)
    out += fmt::format("{:<48} {:<12} {:<25} {:<26} {}\n", r.to_string(), to_string(r.state), timestamp(r.created_at),
                       lease_text(r), timestamp(r.expires_at));
  out += fmt::format("{} record{}\n", records.size(), records.size() == 1 ? "" : "s");
  return out;
}

outcome inspect(store& s, const request& r, bool json) {
  const identity id(r.scope, r.key);
  const std::optional<record_summary> found = s.inspect_record(id, r.with_payload);
  if (!found) {
    outcome o{.code = exit_code::not_found, .output = {}, .error = "no record " + id.to_string()};
    if (json) o.output = dump({{"record", id.to_string()}, {"found", false}});
    return o;
  }
  return {.code = exit_code::done, .output = json ? dump(to_json(*found)) : describe(*found), .error = {}};
}

outcome list(store& s, const request& r, bool json) {
  const std::vector<record_summary> records = s.list_records(r.query);
  if (!json) return {.code = exit_code::done, .output = table(records), .error = {}};
  json_value all = json_value::array();
  for (const record_summary& record : records) all.push_back(to_json(record));
  return {.code = exit_code::done, .output = dump({{"records", all}, {"count", records.size()}}), .error = {}};
}

outcome release(store& s, const request& r, bool json) {
  const identity id(r.scope, r.key);
  const admin_release result = s.release_record(id, r.force);
  outcome o;
  switch (result) {
    case admin_release::released:
      o.output = json ? "" : fmt::format("released {}\n", id.to_string());
      break;
    case admin_release::not_found:
      o.code = exit_code::not_found;
      o.error = "no record " + id.to_string();
      break;
    case admin_release::lease_live:
      o.code = exit_code::refused;
      o.error = fmt::format("refused: {} is held under a live lease; its holder may still be working. release --force "
                            "ends the lease: the holder's completion is then refused, and the next caller runs again",
                            id.to_string());
      break;
    case admin_release::completed:
      o.code = exit_code::refused;
      o.error = fmt::format("refused: {} is complete; it replays until it expires (purge deletes it then)",
                            id.to_string());
      break;
  }
  if (json) {
    static constexpr const char* names[] = {"released", "not_found", "lease_live", "completed"};
    o.output = dump({{"record", id.to_string()}, {"result", names[static_cast<int>(result)]}});
  }
  return o;
}

outcome purge(store& s, bool json) {
  const std::size_t deleted = s.purge_expired();
  return {.code = exit_code::done,
          .output = json ? dump({{"purged", deleted}}) : fmt::format("purged {} expired records\n", deleted),
          .error = {}};
}

outcome stats(store& s, bool json) {
  const record_counts c = s.count_records();
  if (json)
    return {.code = exit_code::done,
            .output = dump({{"in_progress", c.in_progress},
                            {"abandoned", c.abandoned},
                            {"completed", c.completed},
                            {"expired", c.expired}}),
            .error = {}};
  return {.code = exit_code::done,
          .output = fmt::format("in progress  {}\nabandoned    {}  (in progress, lease lapsed: the holder is gone)\n"
                                "completed    {}\nexpired      {}  (waiting for a purge)\n",
                                c.in_progress, c.abandoned, c.completed, c.expired),
          .error = {}};
}

}  // namespace

outcome run(const std::string& command, const request& r, const std::string& spec, bool json) {
  auto failed = [&](exit_code code, const std::exception& e) {
    return outcome{.code = code, .output = {}, .error = without_secrets(e.what(), spec)};
  };
  try {
    // Arguments first: a bad scope, key or query is a usage error whatever the store.
    if (command == "inspect" || command == "release") (void)identity(r.scope, r.key);
    if (command == "list") r.query.validate();
    const std::unique_ptr<store> s = open_store(spec);
    if (!s->supports_administration())
      return {.code = exit_code::usage,
              .output = {},
              .error = fmt::format("{} does not offer administration: no other process can reach its records",
                                   s->name())};
    if (command == "inspect") return inspect(*s, r, json);
    if (command == "list") return list(*s, r, json);
    if (command == "release") return release(*s, r, json);
    if (command == "purge") return purge(*s, json);
    return stats(*s, json);
  } catch (const configuration_error& e) {
    return failed(exit_code::usage, e);
  } catch (const invalid_key_error& e) {
    return failed(exit_code::usage, e);
  } catch (const store_error& e) {
    return failed(exit_code::unreachable, e);
  } catch (const error& e) {
    return failed(exit_code::unreachable, e);
  }
}

}  // namespace idem::admin
