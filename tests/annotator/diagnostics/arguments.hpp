// Argument names and shapes: unknown, duplicated, missing key, values that are not strings.
#pragma once

struct Event {
  long id;
};

struct Arguments {
  // expected-error@+1:40 {{unknown argument 'waittimeout' in idem::idempotent; did you mean 'waitTimeout'?}}
  [[idem::idempotent(key = "event.id", waittimeout = "PT0S")]] void a(const Event& event);

  // expected-error@+1:40 {{unknown argument 'retries' in idem::idempotent; expected key, scope, ttl, lease, waitTimeout, completion, transaction or codec}}
  [[idem::idempotent(key = "event.id", retries = "3")]] void b(const Event& event);

  // expected-note@+2:40 {{'ttl' first given here}}
  // expected-error@+1:54 {{duplicate argument 'ttl' in idem::idempotent}}
  [[idem::idempotent(key = "event.id", ttl = "PT1H", ttl = "PT2H")]] void c(const Event& event);

  // expected-error@+1:11 {{idem::idempotent on 'Arguments::d' needs a key: an expression over its parameters that names the attempt, for example key = "event.id"}}
  [[idem::idempotent(ttl = "PT1H")]] void d(const Event& event);

  // expected-error@+1:11 {{idem::idempotent on 'Arguments::e' needs a key: an expression over its parameters that names the attempt, for example key = "event.id"}}
  [[idem::idempotent]] void e(const Event& event);

  // expected-error@+1:46 {{the value of 'ttl' must be a string literal, as in ttl = "..."}}
  [[idem::idempotent(key = "event.id", ttl = 30)]] void f(const Event& event);

  // A malformed argument stops the reading of the attribute, so the key is missing too.
  // expected-error@+2:26 {{expected '=' after 'key'}}
  // expected-error@+1:11 {{idem::idempotent on 'Arguments::g' needs a key: an expression over its parameters that names the attempt, for example key = "event.id"}}
  [[idem::idempotent(key "event.id")]] void g(const Event& event);

  // expected-error@+1:29 {{idem::idempotent on 'Arguments::h' needs a key: an expression over its parameters that names the attempt, for example key = "event.id"}}
  [[idem::idempotent(key = "  ")]] void h(const Event& event);
};
