// Durations: the runtime's one ISO-8601 parser (idem::parse_duration) and its lower bounds.
#pragma once

struct Event {
  long id;
};

struct Durations {
  // expected-error@+1:53 {{invalid lease "PT30": number without a designator (D, H, M or S)}}
  [[idem::idempotent(key = "event.id", lease = "PT30")]] void a(const Event& event);

  // expected-error@+1:47 {{invalid ttl "30s": a duration must start with 'P', as in "PT30S"}}
  [[idem::idempotent(key = "event.id", ttl = "30s")]] void b(const Event& event);

  // expected-error@+1:57 {{invalid waitTimeout "P1M": years, months and weeks are not allowed: their length is ambiguous; for minutes write "PTnM"}}
  [[idem::idempotent(key = "event.id", waitTimeout = "P1M")]] void c(const Event& event);

  // expected-error@+1:47 {{ttl "PT0S" is too short: a result must stay replayable for at least 1 ms}}
  [[idem::idempotent(key = "event.id", ttl = "PT0S")]] void d(const Event& event);

  // expected-error@+1:49 {{lease "PT0.001S" is too short: it must be at least 2 ms because the heartbeat renews it every lease/2}}
  [[idem::idempotent(key = "event.id", lease = "PT0.001S")]] void e(const Event& event);

  // expected-error@+1:55 {{invalid waitTimeout "-PT1S": signed durations are not allowed; a duration here is never negative}}
  [[idem::idempotent(key = "event.id", waitTimeout = "-PT1S")]] void f(const Event& event);

  // expected-error@+1:54 {{invalid ttl "PT1.0001S": fractions finer than a millisecond are not allowed}}
  [[idem::idempotent(key = "event.id", ttl = "PT1.0001S")]] void g(const Event& event);

  // Valid: empty means the engine's default; PT0S is a valid wait (look once, never block).
  [[idem::idempotent(key = "event.id", ttl = "", lease = "PT0.002S", waitTimeout = "PT0S")]] void h(const Event& event);
};
