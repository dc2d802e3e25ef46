// idem/log.hpp — the small sink through which the engine reports what it cannot throw.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace idem {

enum class log_level { debug, info, warning, error };
std::string_view to_string(log_level level) noexcept;

// One report: a listener that threw, a completion that could not be recorded. `message` names
// the record as Scope/#xxxxxxxx and never contains a raw key.
struct log_record {
  log_level level = log_level::info;
  std::string message;
};

// Where reports go. Must be safe to call from any thread.
using log_sink = std::function<void(const log_record&)>;

// The default sink: one line on stderr, "idem: <level>: <message>", for warning and error.
void stderr_log_sink(const log_record& record);

}  // namespace idem
