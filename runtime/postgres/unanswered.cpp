// runtime/postgres/unanswered.cpp — claims and releases that were sent and not answered, settled in
// the background once the server answers again.
#include <fmt/format.h>

#include <algorithm>
#include <idem/deadline.hpp>

#include "store_impl.hpp"

namespace idem {

using namespace detail::pg;

namespace {

// Unanswered claims and releases remembered at once; beyond it the oldest is left to its lease.
constexpr std::size_t max_unanswered = 1024;
// How long the store waits, while the server answers, for the server process that received an
// unanswered statement to end before it gives up on settling it (a backend frozen on its own).
constexpr std::chrono::minutes max_backend_wait{10};
// Background retries of unanswered statements: the first soon after the failure, then doubling.
constexpr milliseconds settle_first_retry{20};
constexpr milliseconds settle_max_retry{1000};

// Which of the given server processes are still running. Param: pids as "1,2,3". Rows: pid.
constexpr const char* alive_backends_sql =
    "SELECT pid::int8 FROM pg_stat_activity WHERE pid = ANY (string_to_array($1, ',')::int4[])";

}  // namespace

// Unanswered claims and releases
//
// A statement sent to a server that stops answering (frozen, stalled, cut off) may run when the
// server wakes, after the client gave up and closed the connection: a claim then leaves the
// record in progress under a token nobody holds. The store knows the token; it remembers the
// record and releases it (the ordinary fenced release: only while in progress under exactly that
// token) once the server answers again and the server process that received the statement has
// ended (before that, the statement may still run: a release sent earlier would find nothing and
// the claim would then hold the key). A release that was not answered is sent again the same way.

void postgres_store::impl::remember_unanswered(std::string_view operation, const identity& ident, const digest& d,
                                               const lease_token& token, std::vector<int> backends) {
  unanswered_statement u;
  u.operation = std::string(operation);
  u.scope = ident.scope();
  u.d = d;
  u.token = token;
  u.backends = std::move(backends);
  u.record = ident.to_string();
  std::optional<std::string> dropped;
  {
    std::lock_guard lock(unanswered_mutex);
    if (settle_stop) return;
    if (!settler.joinable()) {
      try {
        settler = std::thread([this] { settle_loop(); });
      } catch (...) {
        return;  // no thread: the record is left to its lease, as before
      }
    }
    u.id = ++unanswered_ids;
    if (unanswered_list.size() >= max_unanswered) {
      dropped = unanswered_list.front().record;
      unanswered_list.pop_front();
      unanswered_dropped.fetch_add(1, std::memory_order_relaxed);
    }
    unanswered_list.push_back(std::move(u));
    unanswered_count.fetch_add(1, std::memory_order_relaxed);
    settle_kicked = true;
  }
  unanswered_changed.notify_all();
  if (dropped)
    log(log_level::warning,
        fmt::format("postgres_store: more than {} unanswered statements to settle; {} is left to its lease",
                    max_unanswered, *dropped));
}

void postgres_store::impl::settle_loop() {
  std::unique_lock lock(unanswered_mutex);
  milliseconds pause = settle_first_retry;
  for (;;) {
    unanswered_changed.wait(lock, [&] { return settle_stop || !unanswered_list.empty(); });
    if (settle_stop) return;
    // A new entry or a statement the server answered elsewhere starts a round at once (after
    // the first short pause); otherwise wait out the backoff.
    unanswered_changed.wait_for(lock, pause, [&] { return settle_stop || settle_kicked; });
    if (settle_stop) return;
    const bool kicked = settle_kicked;
    settle_kicked = false;
    std::vector<unanswered_statement> batch(unanswered_list.begin(), unanswered_list.end());
    lock.unlock();
    const round_result r = settle_round(batch);
    lock.lock();
    for (const auto& [id, outcome] : r.settled) {
      for (auto it = unanswered_list.begin(); it != unanswered_list.end(); ++it) {
        if (it->id != id) continue;
        unanswered_list.erase(it);
        break;
      }
    }
    for (const auto& [id, since] : r.waiting) {
      for (auto& u : unanswered_list)
        if (u.id == id && !u.alive_since) u.alive_since = since;
    }
    if (r.server_answered) {
      // Waiting for a backend to end: look again soon, less often the longer it takes.
      pause = kicked || r.progress ? settle_first_retry : std::min(pause * 2, settle_max_retry);
    } else {
      pause = std::min(std::max(pause, settle_first_retry) * 2, settle_max_retry);
      settle_awaits_server.store(true, std::memory_order_relaxed);
    }
  }
}

// One attempt at everything remembered: which receiving server processes still run (one
// statement), then a fenced release of each record whose processes have all ended.
postgres_store::impl::round_result postgres_store::impl::settle_round(const std::vector<unanswered_statement>& batch) {
  round_result result;
  const auto deadline = deadline_after(options.operation_timeout);
  std::string pids;
  for (const auto& u : batch)
    for (const int pid : u.backends) pids += (pids.empty() ? "" : ",") + std::to_string(pid);
  try {
    auto c = pool.acquire(deadline);
    std::vector<int> alive;
    if (!pids.empty()) {
      param_list p;
      p.text(pids);
      const std::array<Oid, 1> types{oid_text};
      const result_ptr r = run_sql(c, alive_backends_sql, types.data(), p, deadline);
      for (int row = 0; row < PQntuples(r.get()); ++row) alive.push_back(static_cast<int>(get_int8(r.get(), row, 0)));
    }
    result.server_answered = true;
    const auto now = steady::now();
    for (const auto& u : batch) {
      const bool running = std::any_of(u.backends.begin(), u.backends.end(), [&](int pid) {
        return std::find(alive.begin(), alive.end(), pid) != alive.end();
      });
      if (running) {
        unanswered_backend_alive.fetch_add(1, std::memory_order_relaxed);
        if (u.alive_since && now - *u.alive_since > max_backend_wait) {
          unanswered_dropped.fetch_add(1, std::memory_order_relaxed);
          result.settled.emplace_back(u.id, false);
          log(log_level::warning,
              fmt::format("postgres_store: the server process that received an unanswered {} of {} still runs "
                          "after {} min; the record is left to its lease",
                          u.operation, u.record, max_backend_wait.count()));
        } else {
          result.waiting.emplace_back(u.id, now);
        }
        continue;
      }
      param_list p;
      p.text(u.scope).bytes(u.d.data(), u.d.size()).uuid(u.token).text(u.scope + ':' + to_hex(u.d.data(), u.d.size()));
      const result_ptr r = run(c, statement_id::release, p, deadline);
      const bool released = PQntuples(r.get()) == 1 && PQnfields(r.get()) == 4 && get_int8(r.get(), 0, 0) == 1;
      result.settled.emplace_back(u.id, released);
      result.progress = true;
      if (released) {
        unanswered_released.fetch_add(1, std::memory_order_relaxed);
        log(log_level::info, fmt::format("postgres_store: released {}, left in progress by an unanswered {} that "
                                         "the server ran after the client gave up",
                                         u.record, u.operation));
      } else {
        unanswered_void.fetch_add(1, std::memory_order_relaxed);
      }
    }
  } catch (const pg_error&) {
    // Not answering yet (or refusing): the next round tries again. What was settled stays so.
  } catch (const std::exception&) {
    // A malformed answer: try again later rather than end the thread.
  }
  return result;
}

}  // namespace idem
