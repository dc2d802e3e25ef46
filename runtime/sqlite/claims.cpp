// runtime/sqlite/claims.cpp — the blocking try_acquire: acquire_attempts (store_parts.hpp) driven
// by waiting on the record's waiters; the asynchronous one drives the same machine (async_calls.cpp).
#include "store_parts.hpp"

namespace idem {

acquire_result sqlite_store::try_acquire(const context& ctx) {
  state& s = *state_;
  try {
    acquire_attempts attempts(s, ctx, deadline_after(ctx.wait));
    for (;;) {
      acquire_attempts::step next = attempts.next();
      if (auto* answer = std::get_if<acquire_result>(&next)) return std::move(*answer);
      const auto& wait = std::get<acquire_attempts::wait_for>(next);
      attempts.woken(attempts.enrollment().wait_until(wait.seen, wait.until));
    }
  } catch (const sqlite_failure& f) {
    s.unavailable("try_acquire", &ctx.id, f.what());
  }
}

}  // namespace idem
