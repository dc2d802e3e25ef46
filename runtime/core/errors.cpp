// runtime/core/errors.cpp — the messages of the error types that carry data.
#include <idem/errors.hpp>

#include <fmt/chrono.h>
#include <fmt/format.h>

namespace idem {

fingerprint_mismatch_error::fingerprint_mismatch_error(const std::string& record, std::string stored, std::string received)
    : error(fmt::format("request fingerprint mismatch for {}: the key was first used with fingerprint {}, now with {}",
                        record, stored, received)),
      stored_(std::move(stored)),
      received_(std::move(received)) {}

in_flight_error::in_flight_error(const std::string& record, std::chrono::milliseconds retry_after)
    : error(fmt::format("another caller is already running {}; retry after {} ms", record, retry_after.count())),
      retry_after_(retry_after) {}

rollback_error::rollback_error(const std::string& record)
    : error(fmt::format("completion of {} rolled back with the caller's transaction", record)) {}

}  // namespace idem
