// Scopes: the runtime's rule (idem::scope_problem), the default, and conflicts between functions.
#pragma once

struct Event {
  long id;
};

struct Scopes {
  // expected-error@+1:49 {{invalid scope "orders:v2": scope must not contain ':' (stores compose scope and key with it)}}
  [[idem::idempotent(key = "event.id", scope = "orders:v2")]] void a(const Event& event);

  // An empty scope is the default one (see empty_values.hpp); only whitespace is refused.
  // expected-error@+1:49 {{invalid scope " ": scope must not be blank}}
  [[idem::idempotent(key = "event.id", scope = " ")]] void b(const Event& event);

  // expected-error@+1:49 {{invalid scope "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": scope must not exceed 128 characters, got 129}}
  [[idem::idempotent(key = "event.id", scope = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")]] void c(const Event& event);

  // Two functions may share a scope when they agree.
  [[idem::idempotent(key = "event.id", scope = "Shared.one", ttl = "PT1H")]] void d(const Event& event);
  [[idem::idempotent(key = "event.id", scope = "Shared.one", ttl = "PT1H")]] void e(const Event& event);

  // expected-note@+1:49 {{'Scopes::f' uses scope "Shared.two" here}}
  [[idem::idempotent(key = "event.id", scope = "Shared.two", ttl = "PT1H")]] void f(const Event& event);
  // expected-error@+1:49 {{scope "Shared.two" of 'Scopes::g' is also the scope of 'Scopes::f' with different settings (ttl "PT2H" vs "PT1H"): a duplicate of one would be answered with the record of the other}}
  [[idem::idempotent(key = "event.id", scope = "Shared.two", ttl = "PT2H")]] void g(const Event& event);
};

struct Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa {
  // expected-error@+1:11 {{the default scope "Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.run" of 'Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa::run' is invalid: scope must not exceed 128 characters, got 132; set scope = "..."}}
  [[idem::idempotent(key = "event.id")]] void run(const Event& event);
};
