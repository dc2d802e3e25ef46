// tests/support/redelivery.hpp — redelivering a message whose earlier delivery died holding its
// key, as a broker would, until the key comes free (the dead holder's lease lapses).
#pragma once

#include <chrono>
#include <optional>
#include <type_traits>

#include <idem/errors.hpp>

#include "support/eventually.hpp"

namespace idem::test {

// Calls `deliver` every 10 ms while it answers idem::in_flight_error, at most `timeout`. Returns
// what the first call that ran returned, or nullopt if the key never came free. Any other error
// propagates.
template <class Deliver>
std::optional<std::invoke_result_t<Deliver&>> redeliver_until_run(Deliver deliver, std::chrono::milliseconds timeout) {
  std::optional<std::invoke_result_t<Deliver&>> result;
  eventually(
      [&] {
        try {
          result.emplace(deliver());
          return true;
        } catch (const idem::in_flight_error&) {
          return false;
        }
      },
      timeout);
  return result;
}

}  // namespace idem::test
