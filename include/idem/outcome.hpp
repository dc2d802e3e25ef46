// idem/outcome.hpp — what one call through the engine produced.
#pragma once

#include <chrono>
#include <type_traits>
#include <variant>

#include <idem/errors.hpp>
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
// fingerprint_mismatch_error. A std::variant, so std::get_if, std::holds_alternative and
// std::visit work on it; the members below answer the usual questions without them.
template <class T>
class [[nodiscard]] outcome : public std::variant<executed<T>, replayed<T>, in_flight> {
 public:
  using variant_type = std::variant<executed<T>, replayed<T>, in_flight>;
  using variant_type::variant_type;

  // The action ran on this call.
  bool ran() const noexcept { return this->index() == 0; }
  // An earlier call's result was handed back.
  bool is_replay() const noexcept { return this->index() == 1; }
  // Another caller holds the record; nothing ran.
  bool is_in_flight() const noexcept { return this->index() == 2; }
  // ran() or is_replay(): there is a result.
  bool has_value() const noexcept { return !is_in_flight(); }

  // The result, whether it ran now or was replayed. Throws in_flight_error when is_in_flight()
  // (its message names no record: the outcome does not know it).
  template <class U = T>
    requires(!std::is_void_v<U>)
  U& value() & {
    return value_of(*this);
  }
  template <class U = T>
    requires(!std::is_void_v<U>)
  const U& value() const& {
    return value_of(*this);
  }
  template <class U = T>
    requires(!std::is_void_v<U>)
  U&& value() && {
    return std::move(value_of(*this));
  }

  // The holder's remaining lease when is_in_flight(), else zero.
  std::chrono::milliseconds retry_after() const noexcept {
    const in_flight* busy = std::get_if<in_flight>(this);
    return busy != nullptr ? busy->retry_after : std::chrono::milliseconds::zero();
  }

 private:
  template <class Self>
  static auto& value_of(Self& self) {
    if (auto* ran_now = std::get_if<executed<T>>(&self)) return ran_now->value;
    if (auto* replay = std::get_if<replayed<T>>(&self)) return replay->value;
    throw in_flight_error("the record", self.retry_after());
  }
};

}  // namespace idem
