// idem/json_codec.hpp — a codec for every type nlohmann/json can serialise.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include <idem/codec.hpp>
#include <idem/errors.hpp>
#include <idem/payload.hpp>

namespace idem {

// idem::json_codec
//
// Encodes a value with nlohmann::json (to_json / NLOHMANN_DEFINE_TYPE_*) into an
// "application/json" payload and decodes it back. Decoding a payload of another type, or JSON
// that does not convert to T, throws corrupt_record_error.
struct json_codec {
  static constexpr std::string_view type = "application/json";

  template <class T>
  payload encode(const T& value) const {
    payload p;
    p.type = std::string(type);
    p.body = nlohmann::json(value).dump();
    return p;
  }

  template <class T>
  T decode(const payload& p) const {
    if (p.type != type) throw corrupt_record_error("json_codec cannot decode a payload of type '" + p.type + "'");
    try {
      return nlohmann::json::parse(p.body).get<T>();
    } catch (const nlohmann::json::exception& e) {
      throw corrupt_record_error(std::string("json_codec could not decode the stored payload: ") + e.what());
    }
  }
};

}  // namespace idem
