// runtime/sqlite/record_format.cpp
#include "record_format.hpp"

#include <cstdint>
#include <limits>
#include <stdexcept>

namespace idem::detail {

std::array<unsigned char, 16> token_bytes(const lease_token& token) noexcept {
  std::array<unsigned char, 16> out{};
  for (int i = 0; i < 8; ++i) {
    out[static_cast<std::size_t>(i)] = static_cast<unsigned char>(token.high() >> (56 - 8 * i));
    out[static_cast<std::size_t>(8 + i)] = static_cast<unsigned char>(token.low() >> (56 - 8 * i));
  }
  return out;
}

std::optional<lease_token> token_from_bytes(std::string_view bytes) noexcept {
  if (bytes.size() != 16) return std::nullopt;
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    high = (high << 8) | static_cast<unsigned char>(bytes[i]);
    low = (low << 8) | static_cast<unsigned char>(bytes[8 + i]);
  }
  return lease_token(high, low);
}

namespace {

void put_u32(std::string& out, std::size_t value) {
  if (value > std::numeric_limits<std::uint32_t>::max()) throw std::length_error("payload attribute too large");
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffU));
}

bool get_u32(std::string_view& in, std::size_t& value) {
  if (in.size() < 4) return false;
  value = 0;
  for (std::size_t i = 0; i < 4; ++i) value |= static_cast<std::size_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(4);
  return true;
}

bool get_string(std::string_view& in, std::string& value) {
  std::size_t size = 0;
  if (!get_u32(in, size) || in.size() < size) return false;
  value.assign(in.substr(0, size));
  in.remove_prefix(size);
  return true;
}

}  // namespace

std::string encode_attributes(const attribute_map& attributes) {
  std::string out;
  if (attributes.empty()) return out;
  std::size_t total = 4;
  for (const auto& [name, value] : attributes) total += 8 + name.size() + value.size();
  out.reserve(total);
  put_u32(out, attributes.size());
  for (const auto& [name, value] : attributes) {
    put_u32(out, name.size());
    out += name;
    put_u32(out, value.size());
    out += value;
  }
  return out;
}

std::optional<attribute_map> decode_attributes(std::string_view bytes) {
  attribute_map out;
  if (bytes.empty()) return out;
  std::size_t count = 0;
  if (!get_u32(bytes, count)) return std::nullopt;
  for (std::size_t i = 0; i < count; ++i) {
    std::string name;
    std::string value;
    if (!get_string(bytes, name) || !get_string(bytes, value)) return std::nullopt;
    if (!out.emplace(std::move(name), std::move(value)).second) return std::nullopt;
  }
  if (!bytes.empty()) return std::nullopt;
  return out;
}

}  // namespace idem::detail
