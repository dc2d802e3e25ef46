// runtime/redis/record_codec.cpp — how payload attributes and numbers travel to the scripts.
#include "record_codec.hpp"

#include <limits>

namespace idem::detail::redis {
namespace {

void append_field(std::string& out, std::string_view bytes) {
  out += std::to_string(bytes.size());
  out += ':';
  out += bytes;
}

// Reads `<len>:<bytes>` at `pos`; advances `pos`.
std::optional<std::string_view> read_field(std::string_view in, std::size_t& pos) {
  const std::size_t colon = in.find(':', pos);
  if (colon == std::string_view::npos) return std::nullopt;
  const auto length = parse_int(in.substr(pos, colon - pos));
  if (!length || static_cast<std::uint64_t>(*length) > in.size() - colon - 1) return std::nullopt;
  std::string_view field = in.substr(colon + 1, static_cast<std::size_t>(*length));
  pos = colon + 1 + static_cast<std::size_t>(*length);
  return field;
}

}  // namespace

std::string encode_attributes(const attribute_map& attributes) {
  std::string out;
  for (const auto& [name, value] : attributes) {
    append_field(out, name);
    append_field(out, value);
  }
  return out;
}

std::optional<attribute_map> decode_attributes(std::string_view bytes) {
  std::size_t pos = 0;
  return detail::decode_attribute_pairs([&] { return pos >= bytes.size(); },
                                        [&] { return read_field(bytes, pos); });
}

std::string encode_payload(const payload& value) {
  std::string out;
  const std::string attributes = encode_attributes(value.attributes);
  out.reserve(value.type.size() + value.body.size() + attributes.size() + 24);
  append_field(out, value.type);
  append_field(out, value.body);
  append_field(out, attributes);
  return out;
}

std::optional<complete_record> decode_complete(std::string_view value) {
  const std::size_t end_of_header = value.find('\n');
  if (end_of_header == std::string_view::npos) return std::nullopt;
  // idem/2 c <completed at> <ttl> <fingerprint>
  std::string_view fields[5];
  std::string_view header = value.substr(0, end_of_header);
  for (std::size_t i = 0; i < 5; ++i) {
    const std::size_t space = header.find(' ');
    if ((space == std::string_view::npos) != (i == 4)) return std::nullopt;
    fields[i] = header.substr(0, space);
    header = space == std::string_view::npos ? std::string_view() : header.substr(space + 1);
  }
  if (fields[0] != "idem/2" || fields[1] != "c" || !parse_int(fields[3]) || fields[4].empty()) return std::nullopt;
  complete_record out;
  const auto completed_at = parse_int(fields[2]);
  // Beyond what system_clock can hold (year 2262) converting it to a time_point would overflow.
  if (!completed_at || *completed_at > max_time_point_ms) return std::nullopt;
  out.completed_at_ms = *completed_at;
  if (fields[4] != "-") out.fingerprint = std::string(fields[4]);

  std::size_t pos = end_of_header + 1;
  const auto type = read_field(value, pos);
  const auto body = type ? read_field(value, pos) : std::nullopt;
  const auto attributes = body ? read_field(value, pos) : std::nullopt;
  if (!attributes || pos != value.size() || type->empty()) return std::nullopt;
  auto decoded = decode_attributes(*attributes);
  if (!decoded) return std::nullopt;
  out.value.type = std::string(*type);
  out.value.body = std::string(*body);
  out.value.attributes = std::move(*decoded);
  return out;
}

std::optional<std::int64_t> parse_int(std::string_view text) noexcept {
  if (text.empty() || text.size() > 19) return std::nullopt;
  if (text.size() > 1 && text.front() == '0') return std::nullopt;  // one spelling per number
  std::int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (value > (std::numeric_limits<std::int64_t>::max() - (c - '0')) / 10) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace idem::detail::redis
