// runtime/core/attributes_codec.cpp — see <idem/detail/attributes_codec.hpp>.
#include <idem/detail/attributes_codec.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>

namespace idem::detail {
namespace {

void put_field(std::string& out, std::string_view field) {
  if (field.size() > std::numeric_limits<std::uint32_t>::max())
    throw std::length_error("a payload attribute's name or value is 4 GiB or longer");
  const auto n = static_cast<std::uint32_t>(field.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xffU));
  out += field;
}

std::optional<std::string_view> take_field(std::string_view& in) {
  if (in.size() < 4) return std::nullopt;
  std::uint32_t n = 0;
  for (std::size_t i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(in[i]);
  in.remove_prefix(4);
  if (in.size() < n) return std::nullopt;
  const std::string_view field = in.substr(0, n);
  in.remove_prefix(n);
  return field;
}

}  // namespace

std::string encode_attributes(const attribute_map& attributes) {
  std::size_t total = 0;
  for (const auto& [name, value] : attributes) total += 8 + name.size() + value.size();
  std::string out;
  out.reserve(total);
  for (const auto& [name, value] : attributes) {
    put_field(out, name);
    put_field(out, value);
  }
  return out;
}

std::optional<attribute_map> decode_attributes(std::string_view bytes) {
  return decode_attribute_pairs([&] { return bytes.empty(); }, [&] { return take_field(bytes); });
}

}  // namespace idem::detail
