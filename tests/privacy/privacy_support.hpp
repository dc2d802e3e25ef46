// tests/privacy/privacy_support.hpp — the privacy scenarios every store runs with a recognisable
// key, and the transcript that collects everything idem says about them: every log line (engine
// sink, store sinks), every exception's what() and, for store errors, operation() and record().
// A scenario passes only if the raw key appears nowhere in it.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/identity.hpp>
#include <idem/json_codec.hpp>
#include <idem/log.hpp>
#include <idem/store.hpp>

namespace idem::privacy {

// The key every scenario uses: recognisable in any dump.
inline constexpr std::string_view secret = "PRIVATE-KEY-7f3a9c";

// `bytes` as lowercase hex, to find the key in hex-rendered columns (bytea, blobs).
inline std::string hex(std::string_view bytes) { return to_hex(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()); }

// True if `text` holds the key raw or hex-encoded (either case).
inline bool reveals(std::string_view text) {
  if (text.find(secret) != std::string_view::npos) return true;
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find(hex(secret)) != std::string::npos;
}

// Everything idem said during a test, thread-safe (log sinks run on heartbeat/purge threads).
class transcript {
 public:
  void add(std::string what, std::string text) {
    std::lock_guard lock(mutex_);
    lines_.push_back(std::move(what) + ": " + std::move(text));
  }
  log_sink sink(std::string source) {
    return [this, source](const log_record& r) { add(source, r.message); };
  }
  // Records the exception in flight (what(), and the fields of a store_error).
  void add_current_exception(std::string_view scenario) {
    try {
      throw;
    } catch (const store_error& e) {
      add(std::string(scenario) + " what", e.what());
      add(std::string(scenario) + " operation", e.operation());
      add(std::string(scenario) + " record", e.record());
    } catch (const fingerprint_mismatch_error& e) {
      add(std::string(scenario) + " what", e.what());
      add(std::string(scenario) + " stored", e.stored());
      add(std::string(scenario) + " received", e.received());
    } catch (const std::exception& e) {
      add(std::string(scenario) + " what", e.what());
    }
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return lines_.size();
  }
  // Fails the test for every line that holds the key; requires at least `min_lines` lines, so a
  // capture that silently caught nothing cannot pass.
  void require_clean(std::size_t min_lines) const {
    std::lock_guard lock(mutex_);
    for (const std::string& line : lines_) {
      INFO(line);
      CHECK_FALSE(reveals(line));
    }
    CHECK(lines_.size() >= min_lines);
  }
  bool contains(std::string_view fragment) const {
    std::lock_guard lock(mutex_);
    for (const std::string& line : lines_)
      if (line.find(fragment) != std::string::npos) return true;
    return false;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

// Runs `fn`, which must throw an idem::error; records it. Fails if nothing is thrown.
template <class Fn>
void expect_error(transcript& t, std::string_view scenario, Fn&& fn) {
  try {
    fn();
    FAIL("scenario " << scenario << ": no exception");
  } catch (const idem::error&) {
    t.add_current_exception(scenario);
  }
}

inline engine_hooks hooks_for(transcript& t) {
  engine_hooks hooks;
  hooks.log = t.sink("engine log");
  return hooks;
}

// The main scenarios, against a working store, with `secret` under `scope`:
// acquire, replay, in flight (wait 0, engine and store), an action that throws, fingerprint
// mismatch, lease lost (the lease expired, another caller stole it, the first tries to complete
// and release), bad key (too long). Every message, field and log line lands in `t`.
inline void run_store_scenarios(store& s, transcript& t, const std::string& scope) {
  engine eng(s, config{}, hooks_for(t));
  const std::string key(secret);

  // acquire, then replay
  {
    auto ctx = eng.make_context(scope + ".run", key);
    auto first = eng.execute<int>(ctx, [] { return 7; }, json_codec{});
    REQUIRE(std::holds_alternative<executed<int>>(first));
    auto again = eng.execute<int>(ctx, [] { return 8; }, json_codec{});
    REQUIRE(std::holds_alternative<replayed<int>>(again));
    CHECK(std::get<replayed<int>>(again).value == 7);
  }

  // in flight: a holder keeps the record; a duplicate with wait 0 gets in_flight, mapped to
  // in_flight_error by the default mapping.
  {
    call_options no_wait;
    no_wait.wait = std::chrono::milliseconds(0);
    auto ctx = eng.make_context(scope + ".busy", key, no_wait);
    const auto held = s.try_acquire(ctx);
    REQUIRE(std::holds_alternative<acquired>(held));
    const auto busy = s.try_acquire(ctx);
    REQUIRE(std::holds_alternative<in_flight>(busy));
    auto outcome = eng.execute<int>(ctx, [] { return 1; }, json_codec{});
    REQUIRE(outcome.is_in_flight());
    expect_error(t, "in flight (outcome)", [&] { static_cast<void>(outcome.value()); });
    expect_error(t, "in flight (engine)", [&] { idem::map_in_flight(eng, ctx, std::get<in_flight>(busy)); });
    s.release(ctx.id, std::get<acquired>(held).token);
  }

  // an action that throws: released, the exception propagates unchanged; the next call runs.
  {
    auto ctx = eng.make_context(scope + ".throws", key);
    CHECK_THROWS_WITH(eng.execute(ctx, [] { throw std::runtime_error("action failed"); }), "action failed");
    auto retried = eng.execute(ctx, [] {});
    CHECK(std::holds_alternative<executed<void>>(retried));
  }

  // fingerprint mismatch
  {
    auto ctx = eng.make_context(scope + ".fingerprint", key);
    ctx.fingerprint = std::string(32, 'a');
    REQUIRE(std::holds_alternative<executed<void>>(eng.execute(ctx, [] {})));
    ctx.fingerprint = std::string(32, 'b');
    try {
      static_cast<void>(eng.execute(ctx, [] {}));
      FAIL("no fingerprint_mismatch_error");
    } catch (const fingerprint_mismatch_error&) {
      t.add_current_exception("fingerprint mismatch");
    }
  }

  // lease lost: a 20 ms lease; a second caller blocks inside try_acquire until it expires and
  // steals it (no sleep: the store's own wait); the first holder's complete and release fail.
  {
    context ctx{.id = identity(scope + ".lease", key), .ttl = std::chrono::hours(1),
                .lease = std::chrono::milliseconds(20), .wait = std::chrono::milliseconds(0)};
    ctx.validate();
    const auto first = s.try_acquire(ctx);
    REQUIRE(std::holds_alternative<acquired>(first));
    context thief = ctx;
    thief.wait = std::chrono::seconds(30);
    const auto stolen = s.try_acquire(thief);
    REQUIRE(std::holds_alternative<acquired>(stolen));
    const lease_token lost = std::get<acquired>(first).token;
    expect_error(t, "lease lost (complete)", [&] { s.complete(ctx.id, lost, payload::none(), std::chrono::hours(1)); });
    expect_error(t, "lease lost (release)", [&] { s.release(ctx.id, lost); });
    CHECK_FALSE(s.extend(ctx.id, lost, std::chrono::seconds(1)));
    s.complete(ctx.id, std::get<acquired>(stolen).token, payload::none(), std::chrono::hours(1));
  }

  // bad key: longer than 255 bytes, starting with the secret
  expect_error(t, "bad key (engine)", [&] { static_cast<void>(eng.make_context(scope + ".bad", key + std::string(300, 'x'))); });
  expect_error(t, "bad key (context)", [&] {
    context ctx{.id = identity(scope + ".bad", key + std::string(300, 'x'))};
    ctx.validate();
  });
}

// Store down: an engine whose completions fail with `failure_policy` log_and_return, so the
// failure is reported through the log sink; `break_store` makes the store fail from then on.
template <class Break>
void run_completion_failure(store& s, transcript& t, const std::string& scope, Break&& break_store) {
  config settings;
  settings.failure_policy = completion_failure_policy::log_and_return;
  engine eng(s, settings, hooks_for(t));
  auto ctx = eng.make_context(scope + ".down", std::string(secret));
  const std::size_t before = t.size();
  auto outcome = eng.execute(ctx, [&] { break_store(); });
  CHECK(std::holds_alternative<executed<void>>(outcome));
  CHECK(t.size() > before);  // the failed completion was reported
}

// A TCP port on 127.0.0.1 that nothing listens on (bound, then closed).
int closed_port();

}  // namespace idem::privacy
