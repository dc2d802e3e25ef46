// idem/store_admin.hpp — what an operator may see and do with a store's records (idem-admin):
// look at one record, list records, free a stuck one, count them.
//
// The raw key is never read back: a record is known by its scope and the SHA-256 of its key, and
// renders as `Scope/#xxxxxxxx` like everywhere else. The payload is read only when asked for.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <idem/payload.hpp>

namespace idem {

enum class record_state {
  in_progress,  // held under a lease (which may have lapsed: the holder is gone)
  completed,    // replayable until its expiry
};
std::string_view to_string(record_state state) noexcept;

// One stored record as an operator sees it. Times come from the store's clock, `read_at` among
// them, so that the remaining lease and time to expiry are exact whatever the reader's clock says.
struct record_summary {
  std::string scope{};
  std::array<unsigned char, 32> key_digest{};  // SHA-256 of the key
  record_state state = record_state::in_progress;
  std::chrono::system_clock::time_point created_at{};  // the acquisition that created the record
  std::optional<std::chrono::system_clock::time_point> lease_expires_at{};  // in progress only
  std::optional<std::chrono::system_clock::time_point> completed_at{};      // completed only
  // Completed: the end of the replay window. In progress: how long the store keeps an abandoned
  // acquisition (purge deletes it after that once its lease lapsed too).
  std::chrono::system_clock::time_point expires_at{};
  bool has_fingerprint = false;
  std::string payload_type{};      // completed only
  std::size_t payload_size = 0;    // the body's bytes; completed only
  std::optional<payload> value{};  // only when asked for, completed only
  std::chrono::system_clock::time_point read_at{};  // the store's clock when it was read

  // `Scope/#xxxxxxxx`, as identity::to_string renders the same record.
  [[nodiscard]] std::string to_string() const;
  // In progress, and the lease has lapsed at read_at: nobody holds the record any more.
  [[nodiscard]] bool lease_lapsed() const noexcept;
};

// Which records list_records returns.
struct record_query {
  std::optional<std::string> scope{};      // only this scope
  std::optional<record_state> state{};     // only this state
  std::chrono::milliseconds older_than{0};  // created at least this long before the store's now
  std::size_t limit = 100;                 // at most this many (1..max_limit)

  static constexpr std::size_t max_limit = 10'000;
  // Throws configuration_error for a limit out of range, a negative age or an invalid scope.
  void validate() const;
};

// What release_record did.
enum class admin_release {
  released,     // the in-progress record was deleted: the next caller acquires it afresh
  not_found,    // no such record
  lease_live,   // refused: the lease has not lapsed, and ending a live lease was not asked for
  completed,    // refused: the record is complete (purge or its ttl ends it, never a release)
};
std::string_view to_string(admin_release result) noexcept;

// How many records a store holds, by what they are.
struct record_counts {
  std::size_t in_progress = 0;  // held under a live lease
  std::size_t abandoned = 0;    // in progress under a lapsed lease: its holder is gone
  std::size_t completed = 0;    // replayable
  std::size_t expired = 0;      // past their expiry, waiting for a purge

  // Counts `r` under the one state it is in at r.read_at (a store that counts in SQL applies the
  // same rule there).
  void add(const record_summary& r) noexcept;
};

}  // namespace idem
