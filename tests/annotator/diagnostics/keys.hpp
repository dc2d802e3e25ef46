// Key expressions: type-checked by Clang's Sema in the scope of the function, errors placed on
// the attribute's string literal, character for character.
#pragma once

#include <string>
#include <vector>

struct Event {
  long id;
  std::string tenant;
  std::vector<int> lines;
};

inline int counter = 0;

struct Keys {
  static inline long next_id = 0;

  // expected-note@9:8 {{'id' declared here}}
  // expected-error@+1:35 {{no member named 'ids' in 'Event'; did you mean 'id'?}}
  [[idem::idempotent(key = "event.ids")]] void a(const Event& event);

  // expected-note@+2:61 {{'event' declared here}}
  // expected-error@+1:29 {{use of undeclared identifier 'evnt'; did you mean 'event'?}}
  [[idem::idempotent(key = "evnt.id")]] void b(const Event& event);

  // expected-error@+1:29 {{the key expression has type 'std::vector<int>'; a key must be an integral value or a string (anything convertible to std::string_view)}}
  [[idem::idempotent(key = "event.lines")]] void c(const Event& event);

  // expected-error@+1:29 {{the key expression may only use the parameters of 'Keys::d'; 'counter' is not one of them (a key must be computable from the call alone)}}
  [[idem::idempotent(key = "counter")]] void d(const Event& event);

  // An escape before the error still puts the caret on the right character.
  // expected-note@10:15 {{'tenant' declared here}}
  // expected-error@+1:58 {{no member named 'tenants' in 'Event'; did you mean 'tenant'?}}
  [[idem::idempotent(key = "event.tenant + \":\" + event.tenants")]] void e(const Event& event);

  // Valid: integral, string-like, expressions over several parameters.
  [[idem::idempotent(key = "event.id")]] void f(const Event& event);
  [[idem::idempotent(key = "event.tenant + \"/\" + std::to_string(event.id)")]] void g(const Event& event);
  [[idem::idempotent(key = "name")]] void h(const char* name);
};
