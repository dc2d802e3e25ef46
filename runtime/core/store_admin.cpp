// runtime/core/store_admin.cpp — the value types of store administration (<idem/store_admin.hpp>).
#include <idem/errors.hpp>
#include <idem/identity.hpp>
#include <idem/store_admin.hpp>

#include <fmt/format.h>

namespace idem {

std::string_view to_string(record_state state) noexcept {
  switch (state) {
    case record_state::in_progress: return "in-progress";
    case record_state::completed: return "completed";
  }
  return "unknown";
}

std::string_view to_string(admin_release result) noexcept {
  switch (result) {
    case admin_release::released: return "released";
    case admin_release::not_found: return "not found";
    case admin_release::lease_live: return "refused: the lease is live";
    case admin_release::completed: return "refused: the record is complete";
  }
  return "unknown";
}

std::string record_summary::to_string() const {
  return scope + "/" + masked_digest(key_digest);
}

bool record_summary::lease_lapsed() const noexcept {
  return state == record_state::in_progress && lease_expires_at && *lease_expires_at <= read_at;
}

void record_counts::add(const record_summary& r) noexcept {
  const bool lapsed = r.lease_lapsed();
  if (r.expires_at <= r.read_at && (r.state == record_state::completed || lapsed)) {
    ++expired;
  } else if (r.state == record_state::completed) {
    ++completed;
  } else if (lapsed) {
    ++abandoned;
  } else {
    ++in_progress;
  }
}

void record_query::validate() const {
  if (limit < 1 || limit > max_limit)
    throw configuration_error(fmt::format("record_query limit is {}; it must be 1..{}", limit, max_limit));
  if (older_than < std::chrono::milliseconds::zero())
    throw configuration_error("record_query older_than must not be negative");
  if (scope)
    if (std::string problem = scope_problem(*scope); !problem.empty())
      throw configuration_error(fmt::format("record_query scope '{}' is invalid: {}", *scope, problem));
}

}  // namespace idem
