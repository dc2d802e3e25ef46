// tests/reliability/soak.cpp — see soak.hpp.
//
// Traffic. Each worker thread draws one operation at a time:
//   fresh    a durable key never used (ttl 1 h): the action runs once, later calls replay it;
//   replay   a random durable key already handed out (possibly still running elsewhere);
//   hot      a small window of keys that every thread hits at once (action 2 ms), so that
//            concurrent duplicates wait inside the store (wait 5 s) or are answered in flight
//            (wait 0); the window moves on every 48 hot calls;
//   flaky    a moving window of 16 keys (every 32 flaky calls) whose action throws on its first
//            0, 1 or 2 runs: the record is released and a later call (or a duplicate waiting
//            inside the store) runs it again;
//   short    a new key with a 100 ms ttl, replayed at once (or run again if it already expired);
//            the records expire and are purged by the engine's purge (every 1 s) and by
//   purge    explicit store.purge_expired() calls (at most one every 200 ms);
//   long-dup a duplicate of the key the long lane works on: wait 0 (in flight, retry_after <=
//            lease) or, one in five, wait 4 s (replays once the holder completes).
// Worker 0 is the long lane instead: one action after the other with lease 1 s that works 2.4 s,
// kept alive by the heartbeat every 500 ms while 5 s leases (period 2.5 s) are held beside it (a
// lapse lets a long-dup steal the key and run it again; the soak found such a heartbeat bug).
// Waits are 0 or 5 s at random unless said otherwise. Each call's outcome is checked as it
// happens; the checks that need every thread's view run on the main thread at the end (Catch2 is
// not thread-safe, so workers only count).
//
// Bookkeeping is preallocated before the warm-up (one slot of atomics per tracked key), so the
// test's own allocations do not show in the heap figures.
#include "soak.hpp"

#include <catch2/catch.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <iomanip>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include <idem/codec.hpp>
#include <idem/engine.hpp>
#include <idem/errors.hpp>

#include "support/eventually.hpp"

// mallinfo2 reports glibc's allocator; under ASan, TSan or MSan the sanitizer's allocator serves
// every allocation and the figure means nothing.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define IDEM_SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define IDEM_SOAK_SANITIZED 1
#endif
#endif

namespace idem::soak {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using clock = std::chrono::steady_clock;

namespace {

// Key spaces: one tracking slot per key, in one preallocated array.
constexpr std::size_t durable_keys = 50'000;
constexpr std::size_t flaky_keys = 16'384;
constexpr std::size_t hot_keys = 16'384;
constexpr std::size_t long_keys = 4'096;
constexpr std::size_t durable_base = 0;
constexpr std::size_t flaky_base = durable_base + durable_keys;
constexpr std::size_t hot_base = flaky_base + flaky_keys;
constexpr std::size_t long_base = hot_base + hot_keys;
constexpr std::size_t tracked_keys = long_base + long_keys;

constexpr milliseconds kept_ttl = 1h;
constexpr milliseconds short_ttl = 100ms;
constexpr milliseconds default_lease = 5s;
constexpr milliseconds long_lease = 1s;
constexpr milliseconds long_action = 2400ms;
constexpr milliseconds hot_action = 2ms;
constexpr milliseconds flaky_action = 1ms;
constexpr milliseconds wait_blocking = 5s;
constexpr milliseconds long_dup_wait = 4s;
constexpr milliseconds purge_interval = 1s;
constexpr milliseconds explicit_purge_every = 200ms;
constexpr std::size_t hot_window = 8;
constexpr std::size_t hot_calls_per_window = 48;
constexpr std::size_t flaky_window = 16;
constexpr std::size_t flaky_calls_per_window = 32;

// Heap bounds. A memory_store record (identity, payload, token, map node, bucket) is a few hundred
// bytes (about 300 measured); 1 KiB each is generous. The fixed slack covers allocator bookkeeping
// and what a pool connection opened once warm brings (hiredis and libpq buffers, tens of KiB each);
// PostgreSQL and Redis grew by 0-24 KiB in 60 000 calls, so 2 MiB catches a leak of ~35 bytes a call.
constexpr std::size_t bytes_per_record = 1024;
constexpr std::size_t heap_slack = 2u << 20;

const char* scope_of(std::size_t index) {
  if (index < flaky_base) return "Soak.durable";
  if (index < hot_base) return "Soak.flaky";
  if (index < long_base) return "Soak.hot";
  return "Soak.long";
}

struct key_state {
  std::atomic<int> runs{0};         // the action started
  std::atomic<int> ok_runs{0};      // the action returned
  std::atomic<int> completions{0};  // execute answered "executed": the store confirmed the record
  std::atomic<int> recorded{-1};    // the run whose value the record holds, once someone saw it
  std::atomic<int> lease_lost{0};   // a completion refused with lease_lost_error
};

// The action's value for key `index`, run `run`: "<index>#<run>".
std::string value_of(std::size_t index, int run) { return std::to_string(index) + '#' + std::to_string(run); }

bool parse_value(std::string_view v, std::size_t& index, int& run) {
  const auto hash = v.find('#');
  if (hash == std::string_view::npos) return false;
  auto a = std::from_chars(v.data(), v.data() + hash, index);
  auto b = std::from_chars(v.data() + hash + 1, v.data() + v.size(), run);
  return a.ec == std::errc{} && a.ptr == v.data() + hash && b.ec == std::errc{} && b.ptr == v.data() + v.size();
}

struct action_failure {};  // what a flaky action throws

// Per-thread counts, summed at the end.
struct counts {
  std::uint64_t calls = 0, executed = 0, replays = 0, in_flight = 0, in_flight_after_wait = 0, throws = 0,
                lease_losses = 0, short_records = 0, short_expired_before_replay = 0, explicit_purged = 0,
                purges = 0, long_completed = 0;
  counts& operator+=(const counts& o) {
    calls += o.calls, executed += o.executed, replays += o.replays, in_flight += o.in_flight;
    in_flight_after_wait += o.in_flight_after_wait, throws += o.throws, lease_losses += o.lease_losses;
    short_records += o.short_records, short_expired_before_replay += o.short_expired_before_replay;
    explicit_purged += o.explicit_purged, purges += o.purges, long_completed += o.long_completed;
    return *this;
  }
};

enum class answer { ran, replayed, in_flight, threw, lease_lost, failed };

// Everything the workers share. One per soak run; engines come and go.
struct shared_state {
  store& backing;
  std::unique_ptr<key_state[]> keys{new key_state[tracked_keys]};
  std::atomic<std::size_t> next_durable{0};
  std::atomic<std::size_t> next_long{0};
  std::atomic<std::uint64_t> hot_calls{0};
  std::atomic<std::uint64_t> flaky_calls{0};
  std::atomic<std::uint64_t> next_short{0};
  std::atomic<long> long_current{-1};  // the long key being worked on, or -1
  std::atomic<clock::rep> last_explicit_purge{0};
  std::atomic<clock::rep> last_short_completed{0};
  std::atomic<std::uint64_t> scheduled_purged{0};
  std::atomic<std::uint64_t> warnings{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> violations{0};
  std::mutex messages_mutex;
  std::vector<std::string> messages;  // the first violations and unexpected errors, for the report

  explicit shared_state(store& s) : backing(s) { messages.reserve(32); }

  void violation(std::string what) {
    violations.fetch_add(1);
    note(std::move(what));
  }
  void unexpected(std::string what) {
    errors.fetch_add(1);
    note("unexpected error: " + std::move(what));
  }
  void note(std::string what) {
    std::lock_guard lock(messages_mutex);
    if (messages.size() < 20) messages.push_back(std::move(what));
  }

  // The engine's log sink: counts the scheduled purge's deletions, warnings and errors.
  void log(const log_record& r) {
    static constexpr std::string_view purge_line = "scheduled purge deleted ";
    if (r.level == log_level::debug && r.message.rfind(purge_line, 0) == 0) {
      std::uint64_t n = 0;
      const char* first = r.message.data() + purge_line.size();
      std::from_chars(first, r.message.data() + r.message.size(), n);
      scheduled_purged.fetch_add(n);
    } else if (r.level == log_level::warning) {
      warnings.fetch_add(1);
      note("warning logged: " + r.message);
    } else if (r.level == log_level::error) {
      errors.fetch_add(1);
      note("error logged: " + r.message);
    }
  }
};

// One call on tracked key `index` through `eng`. The action counts its runs, works
// `action_time`, throws on its first `throw_first` runs and returns value_of(index, run).
answer call(shared_state& sh, engine& eng, counts& c, std::size_t index, milliseconds wait, milliseconds lease,
            milliseconds action_time, int throw_first) {
  key_state& k = sh.keys[index];
  ++c.calls;
  try {
    const context ctx = eng.make_context(scope_of(index), "k" + std::to_string(index),
                                         {.ttl = kept_ttl, .lease = lease, .wait = wait});
    outcome<std::string> o = eng.execute(
        ctx,
        [&]() -> std::string {
          const int run = k.runs.fetch_add(1);
          if (action_time > milliseconds::zero()) std::this_thread::sleep_for(action_time);  // the work
          if (run < throw_first) throw action_failure{};
          k.ok_runs.fetch_add(1);
          return value_of(index, run);
        },
        string_codec{});
    if (o.is_in_flight()) {
      ++c.in_flight;
      if (wait > milliseconds::zero()) ++c.in_flight_after_wait;
      if (o.retry_after() < milliseconds::zero() || o.retry_after() > lease)
        sh.violation("in flight with retry_after " + std::to_string(o.retry_after().count()) + " ms > lease " +
                     std::to_string(lease.count()) + " ms on key " + std::to_string(index));
      return answer::in_flight;
    }
    std::size_t got_index = 0;
    int run = -1;
    if (!parse_value(o.value(), got_index, run) || got_index != index) {
      sh.violation("key " + std::to_string(index) + " answered the value \"" + o.value() + "\"");
      return answer::failed;
    }
    int expected = -1;
    if (!k.recorded.compare_exchange_strong(expected, run) && expected != run)
      sh.violation("key " + std::to_string(index) + " answered run " + std::to_string(run) + ", but run " +
                   std::to_string(expected) + " was recorded" + (o.ran() ? " (completed twice)" : " (replay)"));
    if (o.ran()) {
      ++c.executed;
      if (k.completions.fetch_add(1) > 0) sh.violation("key " + std::to_string(index) + " completed twice");
      return answer::ran;
    }
    ++c.replays;
    return answer::replayed;
  } catch (const action_failure&) {
    ++c.throws;
    return answer::threw;
  } catch (const lease_lost_error&) {
    // The lease expired under the holder and another caller took the record over: the action
    // ran, its completion was refused (fencing). Explains one extra run of this key.
    ++c.lease_losses;
    k.lease_lost.fetch_add(1);
    sh.note(std::string("lease lost on ") + scope_of(index) + " key " + std::to_string(index) + " (wait " +
            std::to_string(wait.count()) + " ms, lease " + std::to_string(lease.count()) + " ms)");
    return answer::lease_lost;
  } catch (const std::exception& e) {
    sh.unexpected(e.what());
    return answer::failed;
  }
}

// A new key with a short ttl, then a duplicate at once.
void short_call(shared_state& sh, engine& eng, counts& c) {
  const std::uint64_t n = sh.next_short.fetch_add(1);
  c.calls += 2;
  try {
    const context ctx = eng.make_context("Soak.short", "s" + std::to_string(n),
                                         {.ttl = short_ttl, .lease = default_lease, .wait = milliseconds::zero()});
    int runs = 0;
    auto action = [&] { return "s" + std::to_string(n) + '#' + std::to_string(runs++); };
    outcome<std::string> first = eng.execute(ctx, action, string_codec{});
    if (first.is_replay()) {
      sh.violation("a short-ttl key never used before replayed");
      return;
    }
    if (first.is_in_flight()) {  // SQLite: the write lock stayed busy (retry_after 0); nothing was claimed
      ++c.in_flight;
      if (first.retry_after() != milliseconds::zero()) sh.violation("a short-ttl key never used was held");
      return;
    }
    ++c.executed;
    ++c.short_records;
    sh.last_short_completed.store(clock::now().time_since_epoch().count());
    outcome<std::string> again = eng.execute(ctx, action, string_codec{});
    if (again.is_replay()) {
      ++c.replays;
      if (again.value() != first.value()) sh.violation("a short-ttl key replayed another value");
    } else if (again.ran()) {
      ++c.executed;  // its ttl had passed: a new record
      ++c.short_records;
      ++c.short_expired_before_replay;
      sh.last_short_completed.store(clock::now().time_since_epoch().count());
    } else {
      ++c.in_flight;
    }
  } catch (const std::exception& e) {
    sh.unexpected(e.what());
  }
}

bool explicit_purge(shared_state& sh, counts& c) {
  const auto now = clock::now().time_since_epoch().count();
  auto last = sh.last_explicit_purge.load();
  if (now - last < std::chrono::duration_cast<clock::duration>(explicit_purge_every).count()) return false;
  if (!sh.last_explicit_purge.compare_exchange_strong(last, now)) return false;
  try {
    c.explicit_purged += sh.backing.purge_expired();
    ++c.purges;
  } catch (const std::exception& e) {
    sh.unexpected(e.what());
  }
  return true;
}

void replay_call(shared_state& sh, engine& eng, counts& c, std::mt19937_64& rng) {
  const std::size_t handed_out = std::min(sh.next_durable.load(), durable_keys);
  if (handed_out == 0) {
    short_call(sh, eng, c);
    return;
  }
  const milliseconds wait = rng() % 2 ? wait_blocking : milliseconds::zero();
  call(sh, eng, c, durable_base + rng() % handed_out, wait, default_lease, milliseconds::zero(), 0);
}

// The long lane (worker 0): one heartbeat-extended action after the other.
void long_lane(shared_state& sh, engine& eng, counts& c, clock::time_point until) {
  while (clock::now() < until) {
    const std::size_t i = sh.next_long.fetch_add(1);
    if (i >= long_keys) return;
    sh.long_current.store(static_cast<long>(long_base + i));
    if (call(sh, eng, c, long_base + i, wait_blocking, long_lease, long_action, 0) == answer::ran) ++c.long_completed;
  }
}

void worker(shared_state& sh, engine& eng, counts& c, std::uint64_t seed, clock::time_point until) {
  std::mt19937_64 rng(seed);
  while (clock::now() < until) {
    const auto pick = rng() % 1000;
    const milliseconds wait = rng() % 2 ? wait_blocking : milliseconds::zero();
    if (pick < 200) {  // fresh
      const std::size_t i = sh.next_durable.fetch_add(1);
      if (i < durable_keys)
        call(sh, eng, c, durable_base + i, wait, default_lease, milliseconds::zero(), 0);
      else
        short_call(sh, eng, c);  // every durable key handed out: new keys come from the short space
    } else if (pick < 450) {
      replay_call(sh, eng, c, rng);
    } else if (pick < 600) {  // hot
      const std::uint64_t n = sh.hot_calls.fetch_add(1);
      const std::size_t i = (n / hot_calls_per_window * hot_window + rng() % hot_window) % hot_keys;
      call(sh, eng, c, hot_base + i, wait, default_lease, hot_action, 0);
    } else if (pick < 700) {  // flaky
      const std::uint64_t n = sh.flaky_calls.fetch_add(1);
      const std::size_t i = (n / flaky_calls_per_window * flaky_window + rng() % flaky_window) % flaky_keys;
      call(sh, eng, c, flaky_base + i, wait, default_lease, flaky_action, static_cast<int>(i % 3));
    } else if (pick < 880) {
      short_call(sh, eng, c);
    } else if (pick < 885) {  // long-dup: mostly wait 0 (in flight at once), one in five waits for the holder
      const long current = sh.long_current.load();
      if (current < 0)
        replay_call(sh, eng, c, rng);
      else
        call(sh, eng, c, static_cast<std::size_t>(current), rng() % 5 == 0 ? long_dup_wait : milliseconds::zero(),
             long_lease, long_action, 0);
    } else if (pick < 915) {
      if (!explicit_purge(sh, c)) replay_call(sh, eng, c, rng);
    } else {
      replay_call(sh, eng, c, rng);
    }
  }
}

// Runs the long lane and `threads` - 1 mixed workers until `until`; returns their summed counts.
counts traffic(shared_state& sh, engine& eng, int threads, std::uint64_t seed, clock::time_point until) {
  std::vector<counts> per_thread(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  pool.reserve(per_thread.size());
  pool.emplace_back(long_lane, std::ref(sh), std::ref(eng), std::ref(per_thread[0]), until);
  for (int t = 1; t < threads; ++t)
    pool.emplace_back(worker, std::ref(sh), std::ref(eng), std::ref(per_thread[static_cast<std::size_t>(t)]),
                      seed + static_cast<std::uint64_t>(t), until);
  for (std::thread& t : pool) t.join();
  counts total;
  for (const counts& c : per_thread) total += c;
  return total;
}

// A holder blocked on an event and a duplicate that waits for it inside try_acquire (seen through
// store::waiting(): no event announces it). Starts whatever the store starts on its first wait.
void prime_waiting(shared_state& sh, engine& eng, const std::string& key) {
  std::promise<void> go;
  std::shared_future<void> released = go.get_future().share();
  std::promise<void> holding;
  const context ctx = eng.make_context("Soak.prime", key, {.ttl = kept_ttl, .wait = wait_blocking});
  std::thread holder([&] {
    try {
      static_cast<void>(eng.execute(ctx, [&] {
        holding.set_value();
        released.wait();
        return std::string("primed");
      }, string_codec{}));
    } catch (const std::exception& e) {
      sh.unexpected(e.what());
    }
  });
  holding.get_future().wait();
  std::string answer;
  std::thread waiter([&] {
    try {
      answer = eng.execute(ctx, [] { return std::string("ran twice"); }, string_codec{}).value();
    } catch (const std::exception& e) {
      sh.unexpected(e.what());
    }
  });
  const bool blocked = idem::test::eventually([&] { return sh.backing.waiting() == 1; }, 10s);
  go.set_value();
  holder.join();
  waiter.join();
  REQUIRE(blocked);
  REQUIRE(answer == "primed");
}

// Replays every tracked key that ran (wait 0, spread over `threads`): a key whose record was
// recorded must answer exactly that value; one that never completed (every run threw) may run now.
counts verify_replays(shared_state& sh, engine& eng, int threads, std::atomic<std::uint64_t>& not_replayed) {
  std::vector<counts> per_thread(static_cast<std::size_t>(threads));
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      counts& c = per_thread[static_cast<std::size_t>(t)];
      for (std::size_t i = next.fetch_add(1); i < tracked_keys; i = next.fetch_add(1)) {
        key_state& k = sh.keys[i];
        if (k.runs.load() == 0) continue;
        const int before = k.recorded.load();
        const answer a = call(sh, eng, c, i, milliseconds::zero(), default_lease, milliseconds::zero(), 0);
        if (before >= 0 && a != answer::replayed) {
          not_replayed.fetch_add(1);
          sh.violation("completed key " + std::to_string(i) + " did not replay at the end");
        }
      }
    });
  for (std::thread& t : pool) t.join();
  counts total;
  for (const counts& c : per_thread) total += c;
  return total;
}

// After the last short-ttl record expired: purges until a purge finds nothing (Redis purges page by
// page, so one call may not sweep everything). Returns what was deleted.
std::uint64_t final_purge(shared_state& sh) {
  const clock::time_point last{clock::duration{sh.last_short_completed.load()}};
  // Expiry is a point in time; no event announces it. The stores' clocks (database, Redis TIME)
  // are this machine's, so a margin of 50 ms covers their rounding.
  std::this_thread::sleep_until(last + short_ttl + 50ms);
  std::uint64_t total = 0;
  for (int i = 0; i < 100; ++i) {
    const std::size_t n = sh.backing.purge_expired();
    total += n;
    if (n == 0) break;
  }
  return total;
}

std::size_t count_entries(const char* dir) {
  std::size_t n = 0;
  DIR* d = ::opendir(dir);
  if (d == nullptr) return 0;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

// Reads the thread count until two reads 20 ms apart agree (bounded): a joined thread may still
// be listed for a few microseconds while the kernel finishes its exit, and no event announces that.
std::size_t settled_threads() {
  std::size_t last = count_entries("/proc/self/task");
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(20ms);
    const std::size_t now = count_entries("/proc/self/task");
    if (now == last) return now;
    last = now;
  }
  return last;
}

std::string mib(std::optional<std::size_t> bytes) {
  if (!bytes) return "n/a";
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(*bytes) / (1024.0 * 1024.0);
  return out.str();
}

std::string kib(std::ptrdiff_t bytes) { return std::to_string(bytes / 1024) + " KiB"; }

long env_number(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n <= 0) throw std::runtime_error(std::string(name) + " must be a positive integer");
  return n;
}

}  // namespace

resources measure(const std::string& file_prefix) {
  resources r;
#ifndef IDEM_SOAK_SANITIZED
  const struct mallinfo2 m = ::mallinfo2();
  r.heap = m.uordblks + m.hblkhd;
#endif
  r.threads = count_entries("/proc/self/task");
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return r;
  const int own = ::dirfd(d);
  char target[4096];
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (std::atoi(e->d_name) == own) continue;
    ++r.fds;
    const ssize_t n = ::readlinkat(own, e->d_name, target, sizeof target - 1);
    if (n <= 0) continue;
    const std::string_view link(target, static_cast<std::size_t>(n));
    if (link.rfind("socket:", 0) == 0) ++r.sockets;
    if (!file_prefix.empty() && link.rfind(file_prefix, 0) == 0) ++r.store_files;
  }
  ::closedir(d);
  return r;
}

settings settings::from_environment() {
  const long seconds = env_number("IDEM_SOAK_SECONDS", 25);
  const long threads = env_number("IDEM_SOAK_THREADS", 6);
  const milliseconds duration{seconds * 1000};
  const milliseconds warmup = std::clamp<milliseconds>(duration / 6, 1s, 5s);
  return {duration, warmup, static_cast<int>(threads)};
}

std::string run(const std::string& name, store& backing, const store_probe& probe, const settings& s) {
  shared_state sh(backing);
  config cfg;
  cfg.default_lease = default_lease;
  cfg.default_wait = wait_blocking;
  cfg.purge_interval = purge_interval;
  cfg.failure_policy = completion_failure_policy::propagate;
  engine_hooks hooks;
  hooks.log = [&sh](const log_record& r) { sh.log(r); };
  const std::uint64_t seed = 0x50a4'0000 + static_cast<std::uint64_t>(::getpid() % 1000) * 100;

  // 1. Warm-up on engine A.
  counts warm_counts;
  {
    engine a(backing, cfg, hooks);
    for (std::size_t i = 0; i < probe.prime_waits; ++i) prime_waiting(sh, a, "prime-" + std::to_string(i));
    warm_counts = traffic(sh, a, s.threads, seed, clock::now() + s.warmup);
    warm_counts.explicit_purged += final_purge(sh);
  }
  const std::size_t records_warm = probe.records_in_process ? probe.records_in_process() : 0;
  const std::uint64_t opened_warm = probe.connections_opened ? probe.connections_opened() : 0;
  const std::uint64_t reconnects_warm = probe.reconnects ? probe.reconnects() : 0;
  const std::size_t threads_warm = settled_threads();
  const resources warm = measure(probe.file_prefix);

  // 2. Measured traffic on engine B, the checks that need it alive, and the replay of every key.
  const auto started = clock::now();
  counts c, verified;
  std::size_t threads_alive = 0;
  std::atomic<std::uint64_t> not_replayed{0};
  {
    engine b(backing, cfg, hooks);
    c = traffic(sh, b, s.threads, seed + 1000, started + s.duration);
    threads_alive = settled_threads();
    verified = verify_replays(sh, b, s.threads, not_replayed);
    verified.explicit_purged += final_purge(sh);
  }
  const double seconds = std::chrono::duration<double>(clock::now() - started).count();

  // 3. The end state, once engine B's threads are gone: back to the warm count exactly (a leaked
  // thread keeps it above; the poll only absorbs the kernel's exit of a joined thread).
  idem::test::eventually([&] { return count_entries("/proc/self/task") == threads_warm; }, 10s);
  const std::size_t threads_end = count_entries("/proc/self/task");
  const std::size_t records_end = probe.records_in_process ? probe.records_in_process() : 0;
  const std::uint64_t opened_end = probe.connections_opened ? probe.connections_opened() : 0;
  const std::uint64_t reconnects_end = probe.reconnects ? probe.reconnects() : 0;
  const resources end = measure(probe.file_prefix);

  // Every tracked key: at most one completion, and a second successful run only where a holder
  // was told its lease was lost (the heartbeat could not keep it; fencing refused its completion).
  std::size_t completed_keys = 0, double_runs = 0, unexplained = 0, max_completions = 0;
  for (std::size_t i = 0; i < tracked_keys; ++i) {
    const key_state& k = sh.keys[i];
    const int ok = k.ok_runs.load(), completions = k.completions.load(), lost = k.lease_lost.load();
    if (k.recorded.load() >= 0) ++completed_keys;
    max_completions = std::max<std::size_t>(max_completions, static_cast<std::size_t>(completions));
    if (ok > 1) ++double_runs;
    if (ok > 1 + lost) ++unexplained;
  }
  counts all = warm_counts;
  all += c;
  all += verified;
  const std::uint64_t purged = all.explicit_purged + sh.scheduled_purged.load();

  // Heap: the records the store keeps in this process, plus what it may add on its own.
  const std::size_t new_records = records_end > records_warm ? records_end - records_warm : 0;
  const std::size_t heap_bound = new_records * bytes_per_record + probe.heap_allowance + heap_slack;
  const std::ptrdiff_t heap_growth =
      warm.heap && end.heap ? static_cast<std::ptrdiff_t>(*end.heap) - static_cast<std::ptrdiff_t>(*warm.heap) : 0;
  // The heartbeat pool grows to the extends that are slow at once plus one (each worker holds at
  // most one lease at a time), plus the purge thread.
  const std::size_t threads_alive_bound = threads_warm + static_cast<std::size_t>(s.threads) + 1 + 1;
  const std::size_t other_fds_warm = warm.fds - warm.sockets - warm.store_files;
  const std::size_t other_fds_end = end.fds - end.sockets - end.store_files;

  std::ostringstream line;
  line << "soak " << name << ": " << std::fixed << std::setprecision(1) << seconds << " s (warm-up "
       << std::chrono::duration<double>(s.warmup).count() << " s), " << s.threads << " threads: " << c.calls
       << " calls (" << c.executed << " executed, " << c.replays << " replays, " << c.in_flight << " in flight, "
       << c.throws << " throws retried, " << c.lease_losses << " lease losses), " << c.long_completed
       << " heartbeat-extended actions completed, " << c.short_records << " short-ttl records, purged " << purged
       << " (all phases; " << all.purges << " explicit calls " << all.explicit_purged << ", scheduled " << sh.scheduled_purged.load() << "), "
        << completed_keys << " keys completed (" << verified.replays << " replayed at the end), " << double_runs << " run twice ("
       << unexplained << " unexplained); heap ";
  if (!warm.heap) line << "not measured (sanitizer allocator)";
  if (warm.heap) line << mib(warm.heap) << " -> " << mib(end.heap) << " MiB";
  if (warm.heap)
    line << " (" << (heap_growth >= 0 ? "+" : "") << kib(heap_growth) << ", bound "
         << kib(static_cast<std::ptrdiff_t>(heap_bound)) << ")";
  if (probe.records_in_process) line << ", records in process " << records_warm << " -> " << records_end;
  line << "; threads " << threads_warm << " -> " << threads_end << " (engine alive " << threads_alive << ", bound "
       << threads_alive_bound << "); fds " << warm.fds << " -> " << end.fds << ", sockets " << warm.sockets << " -> "
       << end.sockets;
  if (!probe.file_prefix.empty()) line << ", store files " << warm.store_files << " -> " << end.store_files;
  if (probe.connections_opened) line << ", connections opened " << opened_warm << " -> " << opened_end;
  if (probe.extra) line << "; " << probe.extra();
  line << "; warnings logged " << sh.warnings.load();
  const std::string summary = line.str();
  std::printf("%s\n", summary.c_str());
  {
    std::lock_guard lock(sh.messages_mutex);
    for (const std::string& m : sh.messages) {
      std::printf("  soak %s: %s\n", name.c_str(), m.c_str());
      UNSCOPED_INFO(m);
    }
  }
  std::fflush(stdout);
  INFO(summary);
  CHECK(sh.errors.load() == 0);
  CHECK(sh.violations.load() == 0);
  CHECK(not_replayed.load() == 0);
  CHECK(max_completions <= 1);
  CHECK(unexplained == 0);
  // No lease lapsed: every holder's heartbeat extended it in time. A loss means a 1 s lease went
  // 500 ms (its heartbeat period) without an extend: a heartbeat bug (before the scheduler's fix,
  // 1-4 per run on every store) or a machine that stalled a thread for half a second.
  CHECK(all.lease_losses == 0);
  // The traffic did what it is for (counts, not timings: each happens many times per second).
  CHECK(c.executed > 0);
  CHECK(c.replays > 0);
  CHECK(all.throws > 0);
  CHECK(purged > 0);
  CHECK(all.long_completed > 0);
  CHECK(completed_keys > 0);
  if (probe.records_in_process) CHECK(records_end == completed_keys + probe.prime_waits);  // + the priming records
  // Resources: nothing leaked once warm.
  if (warm.heap && end.heap) CHECK(heap_growth <= static_cast<std::ptrdiff_t>(heap_bound));
  CHECK(threads_alive <= threads_alive_bound);
  CHECK(threads_end == threads_warm);
  CHECK(other_fds_end == other_fds_warm);
  if (probe.connections_opened) {
    // Every new socket is a pool connection opened once warm (pools open lazily up to their size).
    CHECK(static_cast<long long>(end.sockets) - static_cast<long long>(warm.sockets) ==
          static_cast<long long>(opened_end - opened_warm));
    CHECK(opened_end <= probe.max_connections);  // and none was ever replaced
  } else {
    CHECK(end.sockets == warm.sockets);
  }
  if (!probe.file_prefix.empty()) {
    CHECK(end.store_files >= warm.store_files);
    CHECK(end.store_files <= probe.max_connections);
  }
  CHECK(reconnects_end == reconnects_warm);
  return summary;
}

}  // namespace idem::soak
