// Where the attribute may stand: before a function declaration that can be guarded.
#pragma once

#include <idem/payload.hpp>

#define IDEMPOTENT(...) [[idem::idempotent(__VA_ARGS__)]]

struct IntCodec {
  idem::payload encode(const int& value) const;
  int decode(const idem::payload& p) const;
};

struct Event {
  long id;
};

// expected-error@+1:9 {{idem::idempotent must stand before a function declaration, as in [[idem::idempotent(key = "event.id")]] void on(const Event& event);}}
[[idem::idempotent(key = "event.id")]] int not_a_function = 0;

struct Placement {
  // Valid spellings: namespaced, bare, `using`, beside [[nodiscard]], through a macro, after #if 0.
  [[idem::idempotent(key = "event.id")]] void a(const Event& event);
  [[idempotent(key = "event.id")]] void b(const Event& event);
  [[using idem: idempotent(key = "event.id")]] void c(const Event& event);
  [[nodiscard]] [[idem::idempotent(key = "event.id", codec = "IntCodec")]] int d(const Event& event);
  IDEMPOTENT(key = "event.id") void e(const Event& event);
#if 0
  [[idem::idempotent(key = "this is never compiled", ttl = "nonsense")]] void f(const Event& event);
#endif

  // expected-error@+1:27 {{invalid lease "PT30": number without a designator (D, H, M or S)}}
  IDEMPOTENT(lease = "PT30", key = "event.id") void g(const Event& event);

  // expected-note@+2:11 {{first annotation is here}}
  // expected-error@+1:50 {{'Placement::h' is annotated twice}}
  [[idem::idempotent(key = "event.id")]] [[idem::idempotent(key = "event.id")]] void h(const Event& event);

  // expected-error@+1:11 {{idem::idempotent cannot be applied to a constructor, destructor, conversion function or operator: annotate a named function that it calls}}
  [[idem::idempotent(key = "event.id")]] Placement(const Event& event);

  // expected-error@+1:11 {{'Placement::i' is pure virtual: there is no body to guard; annotate the overriding functions instead}}
  [[idem::idempotent(key = "event.id")]] virtual void i(const Event& event) = 0;

  // expected-error@+2:11 {{idem::idempotent on 'Placement::j' is not supported: it is a template or a member of one; annotate a non-template function that calls it}}
  template <class T>
  [[idem::idempotent(key = "event.id")]] void j(const T& event);

  // expected-error@+1:18 {{idem::idempotent must stand before a function declaration, as in [[idem::idempotent(key = "event.id")]] void on(const Event& event);}}
  void k([[idem::idempotent(key = "event.id")]] const Event& event);

  // A static member function has external linkage: fine.
  [[idem::idempotent(key = "event.id")]] static void m(const Event& event);

 private:
  // expected-error@+1:11 {{'Placement::l' is private: the generated idem::policy and idem::guarded<Placement> cannot name it; make it public}}
  [[idem::idempotent(key = "event.id")]] void l(const Event& event);
};

// expected-error@+1:9 {{'hidden' has internal linkage (static, or in an anonymous namespace): the generated code, compiled in its own translation unit, cannot name it; give it external linkage}}
[[idem::idempotent(key = "event.id")]] static void hidden(const Event& event);

namespace {
// expected-error@+1:9 {{'(anonymous namespace)::unnamed' has internal linkage (static, or in an anonymous namespace): the generated code, compiled in its own translation unit, cannot name it; give it external linkage}}
[[idem::idempotent(key = "event.id")]] void unnamed(const Event& event);
}  // namespace
