// idem/outcome.hpp — what one call through the engine produced.
#pragma once

#include <chrono>
#include <type_traits>
#include <variant>

#include <idem/store.hpp>

namespace idem {

// The action ran on this call; `value` is what it returned.
template <class T>
struct executed {
  T value;
};
template <>
struct executed<void> {};

// An earlier call completed the record; `value` is its result, decoded by the codec.
template <class T>
struct replayed {
  T value;
  std::chrono::system_clock::time_point completed_at;
};
template <>
struct replayed<void> {
  std::chrono::system_clock::time_point completed_at;
};

// idem::outcome<T>
//
// executed<T> | replayed<T> | in_flight (defined in <idem/store.hpp>: retry_after is the holder's
// remaining lease). A fingerprint mismatch is not an outcome: the engine throws
// fingerprint_mismatch_error.
template <class T>
using outcome = std::variant<executed<T>, replayed<T>, in_flight>;

}  // namespace idem
