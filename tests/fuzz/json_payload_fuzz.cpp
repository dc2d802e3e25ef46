// libFuzzer target for json_codec's reading side (idem::detail::parse_stored_json): stored bytes
// that are not JSON are refused with corrupt_record_error, never a crash; what it accepts,
// nlohmann::json::parse accepts as the same value; and whatever nlohmann reads, written back by
// nlohmann (what json_codec stores), reads back unchanged, nesting beyond json_codec::max_depth
// aside.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include <idem/errors.hpp>
#include <idem/json_codec.hpp>

namespace {

// Levels of nesting of a nlohmann value (a scalar is 0).
std::size_t depth_of(const nlohmann::json& value) {
  std::size_t deepest = 0;
  if (value.is_structured())
    for (const auto& item : value) deepest = std::max(deepest, depth_of(item));
  return value.is_structured() ? deepest + 1 : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json ours = idem::detail::parse_stored_json(text);
    const nlohmann::json theirs = nlohmann::json::parse(text);  // throws if it disagrees: a crash
    if (ours != theirs) std::abort();
  } catch (const idem::corrupt_record_error&) {
  }

  const nlohmann::json read = nlohmann::json::parse(text, nullptr, false);
  if (read.is_discarded() || depth_of(read) > idem::json_codec::max_depth) return 0;
  if (idem::detail::parse_stored_json(read.dump()) != read) std::abort();
  return 0;
}
