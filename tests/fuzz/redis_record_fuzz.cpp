// libFuzzer target for the Redis record codec (runtime/redis/record_codec.hpp): what a damaged or
// hostile Redis returns is decoded or refused, never crashes, and is never taken for a record it
// does not spell. The first byte picks what the rest is fed to:
//   0: a complete record's whole value (decode_complete) — accepted values re-encode to the same
//      payload bytes and keep a header the scripts could have written;
//   1: the attributes notation (decode_attributes) — accepted bytes re-encode to themselves;
//   2: a number (parse_int) — accepted text is the decimal spelling of a non-negative value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "record_codec.hpp"

namespace rd = idem::detail::redis;

namespace {

void check_complete(std::string_view value) {
  const auto record = rd::decode_complete(value);
  if (!record) return;
  const std::size_t end_of_header = value.find('\n');
  if (end_of_header == std::string_view::npos) std::abort();
  if (record->completed_at_ms < 0 || record->completed_at_ms > rd::max_time_point_ms || record->value.type.empty())
    std::abort();
  // The fingerprint is one field of the header: no separator inside, "-" spells none.
  if (record->fingerprint == "-" || record->fingerprint.find_first_of(" \n") != std::string::npos) std::abort();
  if (rd::encode_payload(record->value) != value.substr(end_of_header + 1)) std::abort();
  const auto again = rd::decode_complete(std::string(value.substr(0, end_of_header + 1)) + rd::encode_payload(record->value));
  if (!again || again->value != record->value || again->fingerprint != record->fingerprint ||
      again->completed_at_ms != record->completed_at_ms)
    std::abort();
}

void check_attributes(std::string_view bytes) {
  const auto decoded = rd::decode_attributes(bytes);
  if (!decoded) return;
  if (rd::encode_attributes(*decoded) != bytes) std::abort();
}

void check_int(std::string_view text) {
  const auto value = rd::parse_int(text);
  if (!value) return;
  if (*value < 0 || rd::decimal(*value).view() != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: check_complete(rest); break;
    case 1: check_attributes(rest); break;
    default: check_int(rest); break;
  }
  return 0;
}
