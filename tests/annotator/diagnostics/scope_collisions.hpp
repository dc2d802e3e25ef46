// Default scopes that coincide: two functions would share records by accident (after one runs
// for a key, the other is skipped for that key). Sharing a scope is allowed only when at least one
// of the two names it explicitly, and then only with the same settings.
#pragma once

#include <string>

struct Invoice {
  long id;
};

// 1. Free functions of different namespaces: both default to their unqualified name.
namespace billing {
// expected-note@+1:9 {{'billing::handle' uses scope "handle" here}}
[[idem::idempotent(key = "invoice.id")]] void handle(const Invoice& invoice);
}  // namespace billing
namespace mailing {
// expected-error@+1:9 {{the default scope "handle" of 'mailing::handle' is also the default scope of 'billing::handle': they would share records, so that after one runs for a key the other is skipped for that key; set scope = "..." on one of them}}
[[idem::idempotent(key = "invoice.id")]] void handle(const Invoice& invoice);
}  // namespace mailing

// 2. Classes of the same simple name in different namespaces: both default to Consumer.handle,
//    whatever their settings.
namespace payments {
struct Consumer {
  // expected-note@+1:11 {{'payments::Consumer::handle' uses scope "Consumer.handle" here}}
  [[idem::idempotent(key = "invoice.id", ttl = "PT1H")]] void handle(const Invoice& invoice);
};
}  // namespace payments
namespace shipping {
struct Consumer {
  // expected-error@+1:11 {{the default scope "Consumer.handle" of 'shipping::Consumer::handle' is also the default scope of 'payments::Consumer::handle': they would share records, so that after one runs for a key the other is skipped for that key; set scope = "..." on one of them}}
  [[idem::idempotent(key = "invoice.id", ttl = "PT1H")]] void handle(const Invoice& invoice);
};
}  // namespace shipping

// 3. Overloads: both default to Router.handle; they are told apart by their parameters.
struct Router {
  // expected-note@+1:11 {{'Router::handle(int)' uses scope "Router.handle" here}}
  [[idem::idempotent(key = "id")]] void handle(int id);
  // expected-error@+1:11 {{the default scope "Router.handle" of 'Router::handle(const std::string&)' is also the default scope of 'Router::handle(int)': they would share records, so that after one runs for a key the other is skipped for that key; set scope = "..." on one of them}}
  [[idem::idempotent(key = "name")]] void handle(const std::string& name);
};

// 4. On purpose: the second names the first one's default scope (a renamed function keeps its
//    records), with the same settings. No diagnostic.
namespace orders {
[[idem::idempotent(key = "invoice.id", lease = "PT1M")]] void place(const Invoice& invoice);
[[idem::idempotent(key = "invoice.id", scope = "place", lease = "PT1M")]] void place_v2(const Invoice& invoice);

// Named explicitly, but the settings differ: the error is at the named scope.
// expected-note@+1:9 {{'orders::cancel' uses scope "cancel" here}}
[[idem::idempotent(key = "invoice.id", lease = "PT1M")]] void cancel(const Invoice& invoice);
// expected-error@+1:49 {{scope "cancel" of 'orders::cancel_v2' is also the scope of 'orders::cancel' with different settings (lease "PT2M" vs "PT1M"): a duplicate of one would be answered with the record of the other}}
[[idem::idempotent(key = "invoice.id", scope = "cancel", lease = "PT2M")]] void cancel_v2(const Invoice& invoice);

// A third function defaulting to a shared scope still collides with the first default one, even
// though the second named it.
// expected-note@+1:9 {{'orders::refund' uses scope "refund" here}}
[[idem::idempotent(key = "invoice.id")]] void refund(const Invoice& invoice);
[[idem::idempotent(key = "invoice.id", scope = "refund")]] void refund_v2(const Invoice& invoice);
}  // namespace orders
namespace archive {
// expected-error@+1:9 {{the default scope "refund" of 'archive::refund' is also the default scope of 'orders::refund': they would share records, so that after one runs for a key the other is skipped for that key; set scope = "..." on one of them}}
[[idem::idempotent(key = "invoice.id")]] void refund(const Invoice& invoice);
}  // namespace archive
