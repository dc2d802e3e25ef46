// transaction: the runtime's parser (idem::parse_transaction_demand). Refused on HTTP endpoints
// (http_endpoint.hpp) and, with "required", on coroutines (coroutines.hpp).
#pragma once

struct Event {
  long id;
};

struct Transactional {
  // expected-error@+1:55 {{unknown transaction "requires"; expected "caller" or "required"}}
  [[idem::idempotent(key = "event.id", transaction = "requires")]] void a(const Event& event);

  // Valid: case-insensitive; "required" on a free function is guarded through idem::invoke, which
  // then takes a transaction_source.
  [[idem::idempotent(key = "event.id", transaction = "REQUIRED")]] void b(const Event& event);
  [[idem::idempotent(key = "event.id", transaction = "caller")]] void c(const Event& event);
};

[[idem::idempotent(key = "event.id", transaction = "required")]] void transactional_free(const Event& event);
