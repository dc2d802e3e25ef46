// libFuzzer target for the binary attributes codec of the SQL stores
// (<idem/detail/attributes_codec.hpp>): decoding any bytes never crashes, and bytes it accepts are
// exactly the encoding of what it returned (the encoding is canonical: a value has one spelling,
// so damaged bytes cannot pass for a different record). Every accepted map also survives
// encode -> decode unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <idem/detail/attributes_codec.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto decoded = idem::detail::decode_attributes(bytes);
  if (!decoded) return 0;
  const std::string again = idem::detail::encode_attributes(*decoded);
  if (again != bytes) std::abort();  // accepted bytes re-encode to themselves
  const auto round = idem::detail::decode_attributes(again);
  if (!round || *round != *decoded) std::abort();
  return 0;
}
