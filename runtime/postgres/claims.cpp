// runtime/postgres/claims.cpp — try_acquire: one claim statement (idem_claim) per look, and the
// rules between looks (claim_attempts), which the blocking call below and the asynchronous one
// (async_calls.cpp) both follow.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <idem/deadline.hpp>
#include <idem/errors.hpp>

#include <idem/detail/attributes_codec.hpp>
#include "store_impl.hpp"

namespace idem {
namespace detail::pg {
namespace {

// The shortest lock_timeout a claim runs with, whatever the caller's remaining wait.
constexpr milliseconds min_lock_wait{100};

// Reads idem_claim's one row.
claim_answer read_claim(const PGresult* r, const identity& id) {
  if (PQntuples(r) != 1 || PQnfields(r) != 7)
    throw corrupt_record_error(fmt::format("postgres_store: idem_claim answered {} rows of {} columns for {}; "
                                           "is the schema from another version?",
                                           PQntuples(r), PQnfields(r), id.to_string()),
                               "try_acquire", id.to_string());
  claim_answer a;
  const std::string outcome = get_bytes(r, 0, 0);
  if (outcome == "acquired") {
    a.what = claim_answer::kind::acquired;
    a.took_over = !is_null(r, 0, 1);
  } else if (outcome == "duplicate") {
    a.what = claim_answer::kind::duplicate;
    a.value.type = get_bytes(r, 0, 3);
    a.value.body = get_bytes(r, 0, 4);
    if (!is_null(r, 0, 5)) {
      std::optional<detail::attribute_map> attributes = detail::decode_attributes(get_bytes(r, 0, 5));
      if (!attributes)
        throw corrupt_record_error(
            fmt::format("postgres_store: the payload attributes of {} are malformed", id.to_string()), "try_acquire",
            id.to_string());
      a.value.attributes = std::move(*attributes);
    }
    a.completed_at = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::microseconds(get_int8(r, 0, 6))));
  } else if (outcome == "in_flight") {
    a.what = claim_answer::kind::in_flight;
    a.retry_after = milliseconds(std::max<std::int64_t>(get_int8(r, 0, 1), 0));
  } else if (outcome == "mismatch") {
    a.what = claim_answer::kind::mismatch;
    a.stored_fingerprint = get_bytes(r, 0, 2);
  } else if (outcome == "busy") {
    a.what = claim_answer::kind::busy;
  } else {
    throw corrupt_record_error(
        fmt::format("postgres_store: idem_claim answered an unknown outcome for {}", id.to_string()), "try_acquire",
        id.to_string());
  }
  return a;
}

}  // namespace

claim_attempts::claim_attempts(postgres_store::impl& s, const context& ctx, steady::time_point deadline)
    : s_(s), ctx_(ctx), deadline_(deadline), digest_(ctx.id.key_digest()), counted_(s.waiting) {}

param_list claim_attempts::request() const {
  const auto now = steady::now();
  const auto remaining = std::chrono::ceil<milliseconds>(std::max(deadline_ - now, steady::duration::zero()));
  param_list p;
  p.text(ctx_.id.scope())
      .bytes(digest_.data(), digest_.size())
      .uuid(token_)
      .int8(to_ms(ctx_.lease))
      .int8(to_ms(ctx_.ttl));
  if (ctx_.fingerprint) {
    p.text(*ctx_.fingerprint);
  } else {
    p.null();
  }
  // A row lock on a record being taken over is waited for as long as the caller waits, but at
  // least a little, so a lock held for an instant (another claim) is not mistaken for a holder.
  // lock_timeout is an int of milliseconds on the server.
  p.int8(std::clamp<std::int64_t>(
      remaining.count(), std::min<std::int64_t>(s_.options.operation_timeout.count(), min_lock_wait.count()), INT_MAX));
  return p;
}

steady::time_point claim_attempts::bound() const {
  return saturating_add(std::max(deadline_, steady::now()), s_.options.operation_timeout);
}

claim_attempts::step claim_attempts::answered(const PGresult* r) { return decide(read_claim(r, ctx_.id)); }

claim_attempts::step claim_attempts::failed(const pg_error& e, int backend) {
  // Another session got there first (or held a lock past our wait): look again.
  if (e.kind() == failure::server && is_lost_race(e.sqlstate())) return decide(claim_answer{});
  if (e.outcome_unknown()) unanswered_.push_back(backend);
  if (e.kind() == failure::connection_lost && !retried_lost_connection_) {
    retried_lost_connection_ = true;
    return look_again{};
  }
  if (!unanswered_.empty() && !e.outcome_unknown()) {
    // An earlier look was sent and not answered: that this one sent nothing says nothing.
    pg_error unknown = e;
    unknown.set_outcome_unknown();
    settle_unless_acquired();
    throw_unavailable("try_acquire", ctx_.id.to_string(), unknown);
  }
  settle_unless_acquired();
  throw_unavailable("try_acquire", ctx_.id.to_string(), e);
}

void claim_attempts::abandon() { settle_unless_acquired(); }

void claim_attempts::settle_unless_acquired() {
  if (!unanswered_.empty()) s_.remember_unanswered("try_acquire", ctx_.id, digest_, token_, std::move(unanswered_));
  unanswered_.clear();
}

claim_attempts::step claim_attempts::decide(claim_answer a) {
  switch (a.what) {
    case claim_answer::kind::acquired:
      return acquire_result{acquired{token_, a.took_over}};
    case claim_answer::kind::duplicate:
      settle_unless_acquired();
      return acquire_result{duplicate{std::move(a.value), a.completed_at}};
    case claim_answer::kind::mismatch:
      settle_unless_acquired();
      return acquire_result{
          fingerprint_mismatch{std::move(a.stored_fingerprint), ctx_.fingerprint.value_or(std::string())}};
    case claim_answer::kind::in_flight:
    case claim_answer::kind::busy:
      break;
  }
  const auto now = steady::now();
  if (now >= deadline_) {
    settle_unless_acquired();
    return acquire_result{in_flight{a.retry_after}};
  }
  if (!subscription_) {
    // Subscribe, then look again: a completion between our look and the subscription would
    // otherwise never wake us.
    subscription_ = s_.listener.subscribe(record_key(ctx_.id, digest_));
    return look_again{};
  }
  steady::time_point until;
  if (a.what == claim_answer::kind::busy) {
    // The record changed under us: look again at once, then back off a little (up to 32 ms)
    // if races keep being lost, so a storm of them does not become a storm of statements.
    const auto pause = std::chrono::microseconds(lost_races_ == 0 ? 0 : (500 << std::min(lost_races_, 6u)));
    ++lost_races_;
    until = std::min(deadline_, saturating_add(now, pause));
  } else {
    // Wake up when the record is notified, when the holder's lease runs out (to take it over),
    // or at our deadline; while the listener is down, re-check periodically.
    lost_races_ = 0;
    until = std::min(deadline_, saturating_add(now, a.retry_after + milliseconds(1)));
    if (!s_.listener.healthy()) until = std::min(until, saturating_add(now, s_.options.fallback_recheck));
  }
  // Subscribed before the look that found the record held: a notification from then on wakes us.
  counted_.begin();
  if (until <= now) return look_again{};
  return wait_for{until};
}

}  // namespace detail::pg

using namespace detail::pg;

result_ptr postgres_store::impl::claim(const param_list& p, steady::time_point bound, int& backend) {
  auto c = pool.acquire(bound);
  backend = PQbackendPID(c.get());
  return run(c, statement_id::claim, p, bound);
}

acquire_result postgres_store::try_acquire(const context& ctx) {
  claim_attempts attempts(*impl_, ctx, deadline_after(ctx.wait));
  for (;;) {
    claim_attempts::step next = claim_attempts::look_again{};
    int backend = 0;
    try {
      const result_ptr r = impl_->claim(attempts.request(), attempts.bound(), backend);
      next = attempts.answered(r.get());
    } catch (const pg_error& e) {
      next = attempts.failed(e, backend);
    }
    if (auto* answer = std::get_if<acquire_result>(&next)) return std::move(*answer);
    if (const auto* wait = std::get_if<claim_attempts::wait_for>(&next)) attempts.subscription().wait_until(wait->until);
  }
}

}  // namespace idem
