// runtime/postgres/attributes_codec.cpp — payload attributes as bytes.
#include "attributes_codec.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <idem/errors.hpp>

namespace idem::detail::pg {
namespace {

void put_length(std::string& out, std::size_t size) {
  const auto n = static_cast<std::uint32_t>(size);
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
}

}  // namespace

std::string encode_attributes(const attribute_map& attributes) {
  std::string out;
  for (const auto& [key, value] : attributes) {
    put_length(out, key.size());
    out += key;
    put_length(out, value.size());
    out += value;
  }
  return out;
}

attribute_map decode_attributes(std::string_view bytes, const std::string& record) {
  attribute_map out;
  std::size_t at = 0;
  auto take = [&]() -> std::string {
    if (bytes.size() - at < 4)
      throw corrupt_record_error(fmt::format("postgres_store: the attributes of {} are truncated", record));
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
    at += 4;
    if (bytes.size() - at < n)
      throw corrupt_record_error(fmt::format("postgres_store: the attributes of {} are truncated", record));
    std::string s(bytes.substr(at, n));
    at += n;
    return s;
  };
  while (at < bytes.size()) {
    std::string key = take();
    std::string value = take();
    if (!out.emplace(std::move(key), std::move(value)).second)
      throw corrupt_record_error(fmt::format("postgres_store: the attributes of {} repeat a name", record));
  }
  return out;
}

}  // namespace idem::detail::pg
