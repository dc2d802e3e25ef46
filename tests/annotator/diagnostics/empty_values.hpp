// Empty values: as in the original library, an empty scope, ttl, lease, waitTimeout or completion
// means "the default", and an empty codec means "no codec". An empty key does not: every call
// needs one. A scope or codec of only spaces is not empty: it is refused, at the value.
#pragma once

struct Event {
  long id;
};
struct Receipt {
  long id;
};

struct Empties {
  // All defaults: the scope is Empties.all, the durations and the completion the engine's.
  [[idem::idempotent(key = "event.id", scope = "", ttl = "", lease = "", waitTimeout = "", completion = "",
                     codec = "")]] void all(const Event& event);

  // An empty scope does not name a scope: it collides like any default one.
  // expected-note@+1:11 {{'Empties::run(const Event&)' uses scope "Empties.run" here}}
  [[idem::idempotent(key = "event.id")]] void run(const Event& event);
  // expected-error@+1:42 {{the default scope "Empties.run" of 'Empties::run(long)' is also the default scope of 'Empties::run(const Event&)': they would share records, so that after one runs for a key the other is skipped for that key; set scope = "..." on one of them}}
  [[idem::idempotent(key = "id", scope = "")]] void run(long id);

  // expected-error@+1:49 {{invalid scope "  ": scope must not be blank}}
  [[idem::idempotent(key = "event.id", scope = "  ")]] void blank(const Event& event);

  // expected-error@+1:29 {{idem::idempotent on 'Empties::keyless' needs a key: an expression over its parameters that names the attempt, for example key = "event.id"}}
  [[idem::idempotent(key = "")]] void keyless(const Event& event);
  // Nor does one of only white space, line breaks included: blank is one rule for every argument.
  // expected-error@+1:29 {{idem::idempotent on 'Empties::spaced' needs a key: an expression over its parameters that names the attempt, for example key = "event.id"}}
  [[idem::idempotent(key = " \t\n")]] void spaced(const Event& event);

  // An empty codec on a value-returning function is a missing codec, reported at the value.
  // expected-error@+1:49 {{'Empties::settle' returns 'Receipt', so a duplicate call must be given that value back: name a codec that encodes it, for example codec = "idem::json_codec"}}
  [[idem::idempotent(key = "event.id", codec = "")]] Receipt settle(const Event& event);
  // So is one of only spaces (not a type for Clang to complain about at the attribute).
  // expected-error@+1:49 {{'Empties::pay' returns 'Receipt', so a duplicate call must be given that value back: name a codec that encodes it, for example codec = "idem::json_codec"}}
  [[idem::idempotent(key = "event.id", codec = " ")]] Receipt pay(const Event& event);
  // On a void function an empty codec is none, but one of spaces is a codec named for nothing.
  // expected-error@+1:49 {{codec " " is pointless: 'Empties::notify' returns void and has nothing to replay}}
  [[idem::idempotent(key = "event.id", codec = " ")]] void notify(const Event& event);
};
