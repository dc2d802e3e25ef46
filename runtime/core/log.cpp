// runtime/core/log.cpp — log levels, the default stderr sink and listener phase names.
#include <idem/listener.hpp>
#include <idem/log.hpp>

#include <cstdio>

namespace idem {

std::string_view to_string(log_level level) noexcept {
  switch (level) {
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warning: return "warning";
    case log_level::error: return "error";
  }
  return "unknown";
}

std::string_view to_string(failure_phase phase) noexcept {
  switch (phase) {
    case failure_phase::action: return "action";
    case failure_phase::completion: return "completion";
    case failure_phase::rollback: return "rollback";
  }
  return "unknown";
}

void stderr_log_sink(const log_record& record) {
  if (record.level < log_level::warning) return;
  // One write per line so that lines from several threads do not interleave.
  std::string line = "idem: ";
  line += to_string(record.level);
  line += ": ";
  line += record.message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace idem
