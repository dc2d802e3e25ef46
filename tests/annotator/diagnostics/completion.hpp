// Completion modes: the runtime's parser (idem::parse_completion_mode).
#pragma once

struct Event {
  long id;
};

struct Completion {
  // expected-error@+1:54 {{unknown completion mode "joined"; expected "autonomous" or "join-transaction"}}
  [[idem::idempotent(key = "event.id", completion = "joined")]] void a(const Event& event);

  // Valid: case-insensitive, '-' and '_' interchangeable.
  [[idem::idempotent(key = "event.id", completion = "JOIN_TRANSACTION")]] void b(const Event& event);
  [[idem::idempotent(key = "event.id", completion = "autonomous")]] void c(const Event& event);
};
