// libFuzzer target for the ISO-8601 duration parser: never crashes, errors point inside the
// input, and every accepted value survives format -> parse unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <idem/duration.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const idem::duration_parse_result result = idem::parse_duration(text);
  if (!result.ok()) {
    if (result.position > text.size()) std::abort();
    return 0;
  }
  if (result.value.count() < 0) std::abort();
  const auto again = idem::parse_duration(idem::format_duration(result.value));
  if (!again.ok() || again.value != result.value) std::abort();
  return 0;
}
