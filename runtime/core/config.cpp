// runtime/core/config.cpp — idem::config: validation and the JSON reader.
#include <idem/config.hpp>
#include <idem/duration.hpp>
#include <idem/errors.hpp>

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace idem {

std::string_view to_string(completion_failure_policy policy) noexcept {
  return policy == completion_failure_policy::propagate ? "propagate" : "log-and-return";
}

void config::validate() const {
  struct bound {
    std::string_view name;
    duration_field field;
    std::chrono::milliseconds value;
    std::string_view example;
  };
  const bound bounds[] = {{"default_ttl", duration_field::ttl, default_ttl, "PT24H"},
                          {"default_lease", duration_field::lease, default_lease, "PT30S"},
                          {"default_wait", duration_field::wait, default_wait, "PT10S"},
                          {"purge_interval", duration_field::interval, purge_interval, "PT1H"}};
  for (const bound& b : bounds)
    if (const std::string_view problem = duration_problem(b.field, b.value); !problem.empty())
      throw configuration_error(fmt::format("config {} is {}: {}; for example \"{}\"", b.name,
                                            format_duration(b.value), problem, b.example));
}

namespace {

std::string require_string(const nlohmann::json& value, std::string_view field) {
  if (!value.is_string())
    throw configuration_error(fmt::format("config {} must be a string, got {}", field, value.dump()));
  return value.get<std::string>();
}

}  // namespace

config config::from_json(std::string_view json_text) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw configuration_error(fmt::format("config is not valid JSON: {}", e.what()));
  }
  if (!document.is_object()) throw configuration_error("config must be a JSON object");

  config result;
  for (const auto& [field, value] : document.items()) {
    if (field == "default_ttl") {
      result.default_ttl = parse_duration_or_throw(require_string(value, field), "config default_ttl");
    } else if (field == "default_lease") {
      result.default_lease = parse_duration_or_throw(require_string(value, field), "config default_lease");
    } else if (field == "default_wait") {
      result.default_wait = parse_duration_or_throw(require_string(value, field), "config default_wait");
    } else if (field == "purge_interval") {
      result.purge_interval = parse_duration_or_throw(require_string(value, field), "config purge_interval");
    } else if (field == "default_completion") {
      const std::string text = require_string(value, field);
      const auto mode = parse_completion_mode(text);
      if (!mode)
        throw configuration_error(fmt::format(
            "config default_completion \"{}\" is not a completion mode; use \"autonomous\" or \"join-transaction\"", text));
      result.default_completion = *mode;
    } else if (field == "failure_policy") {
      std::string text = require_string(value, field);
      for (char& c : text)
        if (c == '_') c = '-';
      if (text == "propagate")
        result.failure_policy = completion_failure_policy::propagate;
      else if (text == "log-and-return")
        result.failure_policy = completion_failure_policy::log_and_return;
      else
        throw configuration_error(fmt::format(
            "config failure_policy \"{}\" is not a policy; use \"propagate\" or \"log-and-return\"", text));
    } else {
      throw configuration_error(fmt::format("config has an unknown member \"{}\"; known members are default_ttl, "
                                            "default_lease, default_wait, default_completion, failure_policy, purge_interval",
                                            field));
    }
  }
  result.validate();
  return result;
}

config config::from_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw configuration_error(fmt::format("cannot read config file {}", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return from_json(text.str());
  } catch (const configuration_error& e) {
    throw configuration_error(fmt::format("{}: {}", path.string(), e.what()));
  }
}

}  // namespace idem
