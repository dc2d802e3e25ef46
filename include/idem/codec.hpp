// idem/codec.hpp — turning a function's result into a payload and back.
//
// A codec for a value type T is any type C with
//     payload encode(const T&) const;                        and either
//     T decode(const payload&) const;                        (a codec for one type), or
//     template <class U> U decode(const payload&) const;     (a codec for many types)
// Static member functions work too. idem::json_codec ships for every type nlohmann/json can
// serialise (idem::json_serializable, std::optional of one included). A decode that meets a
// payload it cannot read throws corrupt_record_error.
//
// A codec for many types must constrain its templates to the types it really handles: codec_for
// only sees declarations, so an unconstrained `template <class T> payload encode(const T&)`
// satisfies it for every T and fails later, inside its body. idem-annotate checks
// codec_for<C, R> at the `codec` argument of every value-returning annotated function.
#pragma once

#include <concepts>
#include <string>
#include <type_traits>
#include <utility>

#include <idem/payload.hpp>

namespace idem {

template <class C, class T>
concept codec_for = std::default_initializable<C> && requires(const C& c, const T& value, const payload& p) {
  { c.encode(value) } -> std::convertible_to<payload>;
} && (requires(const C& c, const payload& p) {
  { c.template decode<T>(p) } -> std::convertible_to<T>;
} || requires(const C& c, const payload& p) {
  { c.decode(p) } -> std::convertible_to<T>;
});

// Decodes `p` as a T with codec `c`, whichever decode form the codec offers.
template <class T, class C>
  requires codec_for<C, T>
T decode_with(const C& c, const payload& p) {
  if constexpr (requires { c.template decode<T>(p); })
    return c.template decode<T>(p);
  else
    return c.decode(p);
}

// idem::string_codec
//
// Stores a std::string as the body of a "text/plain" payload.
struct string_codec {
  payload encode(const std::string& value) const;
  std::string decode(const payload& p) const;
};

}  // namespace idem
