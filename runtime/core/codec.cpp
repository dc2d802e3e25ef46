// runtime/core/codec.cpp — the codecs idem ships (string, JSON) and decoding errors.
#include <idem/codec.hpp>
#include <idem/errors.hpp>

namespace idem {

payload string_codec::encode(const std::string& value) const {
  payload p;
  p.type = "text/plain";
  p.body = value;
  return p;
}

std::string string_codec::decode(const payload& p) const {
  if (p.type != "text/plain") throw corrupt_record_error("string_codec cannot decode a payload of type '" + p.type + "'");
  return p.body;
}

}  // namespace idem
