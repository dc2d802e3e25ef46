// idem/json_codec.hpp — a codec for every type nlohmann/json can serialise.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include <idem/codec.hpp>
#include <idem/errors.hpp>
#include <idem/payload.hpp>

namespace idem {

namespace detail {

// Whether nlohmann::json converts T both ways (to_json / from_json, NLOHMANN_DEFINE_TYPE_*, or an
// adl_serializer), std::optional<T> (null when empty) included.
template <class T>
struct json_convertible
    : std::bool_constant<std::is_constructible_v<nlohmann::json, const T&> &&
                         requires(const nlohmann::json& j) { j.template get<T>(); }> {};
template <class T>
struct json_convertible<std::optional<T>> : json_convertible<T> {};

template <class T>
nlohmann::json to_json_value(const T& value) {
  if constexpr (requires { typename T::value_type; requires std::is_same_v<T, std::optional<typename T::value_type>>; }) {
    if (!value.has_value()) return nullptr;
    return to_json_value(*value);
  } else {
    return nlohmann::json(value);
  }
}

template <class T>
T from_json_value(const nlohmann::json& j) {
  if constexpr (requires { typename T::value_type; requires std::is_same_v<T, std::optional<typename T::value_type>>; }) {
    if (j.is_null()) return std::nullopt;
    return T(from_json_value<typename T::value_type>(j));
  } else {
    return j.template get<T>();
  }
}

// The JSON value `text` spells, as nlohmann::json::parse would make it (the kind of each number,
// the last of repeated names). Throws corrupt_record_error, quoting none of the text, if `text` is
// not JSON, nests deeper than json_codec::max_depth, or holds what nlohmann reads but never writes:
// a byte-order mark, an integer beyond 64 bits.
[[nodiscard]] nlohmann::json parse_stored_json(std::string_view text);

// value.dump(): the same text, the same exceptions (a string that is not UTF-8 throws
// nlohmann::json::type_error), written by a serializer each thread keeps instead of one built per call.
[[nodiscard]] std::string dump_json(const nlohmann::json& value);

// Empties the arrays and objects in `value`, innermost first. nlohmann's destructor allocates a
// stack for every non-empty array or object it destroys (so that no nesting overflows the call
// stack); here each encode and decode saves that allocation. Recursive down to
// json_codec::max_depth levels (as deep as parse_stored_json reads); anything nested deeper, as a
// value to encode may be, is left whole to nlohmann's destructor.
void dismantle(nlohmann::json& value) noexcept;

// Dismantles a value when the encode or decode is done with it, thrown or not.
class dismantled_at_exit {
 public:
  explicit dismantled_at_exit(nlohmann::json& value) noexcept : value_(value) {}
  dismantled_at_exit(const dismantled_at_exit&) = delete;
  dismantled_at_exit& operator=(const dismantled_at_exit&) = delete;
  ~dismantled_at_exit() { dismantle(value_); }

 private:
  nlohmann::json& value_;
};

}  // namespace detail

// idem::json_serializable<T>
//
// What idem::json_codec encodes and decodes: every type nlohmann::json converts both ways, and
// std::optional of one (an empty optional is stored as JSON null). A type without to_json /
// from_json fails this concept, and so idem::codec_for<idem::json_codec, T>, instead of failing
// deep inside nlohmann/json.
template <class T>
concept json_serializable = detail::json_convertible<std::remove_cvref_t<T>>::value;

// idem::json_codec
//
// Encodes a value with nlohmann::json (to_json / NLOHMANN_DEFINE_TYPE_*) into an
// "application/json" payload and decodes it back (the text read by simdjson, the value converted
// by the type's from_json). Decoding a payload of another type, text that is not JSON, JSON nested
// deeper than max_depth, or JSON that does not convert to T throws corrupt_record_error.
struct json_codec {
  static constexpr std::string_view type = "application/json";
  // The deepest nesting of arrays and objects a stored value may have and still be read back.
  static constexpr std::size_t max_depth = 1024;

  template <json_serializable T>
  payload encode(const T& value) const {
    payload p;
    p.type = std::string(type);
    nlohmann::json tree = detail::to_json_value(value);
    const detail::dismantled_at_exit cleanup(tree);
    p.body = detail::dump_json(tree);
    return p;
  }

  template <json_serializable T>
  T decode(const payload& p) const {
    if (p.type != type) throw corrupt_record_error("json_codec cannot decode a payload of type '" + p.type + "'");
    try {
      nlohmann::json value = detail::parse_stored_json(p.body);
      const detail::dismantled_at_exit cleanup(value);
      return detail::from_json_value<T>(value);
    } catch (const nlohmann::json::exception& e) {
      throw corrupt_record_error(std::string("json_codec could not decode the stored payload: ") + e.what());
    }
  }
};

}  // namespace idem
