// What idem::guarded<C> cannot guard is refused at the attribute (or at the declaration that
// stops it), never left to fail inside the generated code or at run time.
#pragma once

#include <string>

struct Event {
  long id;
};

class Refused {
 public:
  virtual ~Refused() = default;

  // expected-error@+1:11 {{'Refused::quiet' is noexcept, but a guarded call can throw even when the function does not: in_flight_error for a duplicate that is still running, store errors, lease_lost_error; through the noexcept wrapper in idem::guarded<Refused> each would call std::terminate; remove noexcept}}
  [[idem::idempotent(key = "event.id")]] void quiet(const Event& event) noexcept;

  // expected-error@+1:11 {{'Refused::settled' is final: idem::guarded<Refused> must override it to guard calls through a Refused&; remove final, or make the class final (then only idem::invoke guards it)}}
  [[idem::idempotent(key = "event.id")]] virtual void settled(const Event& event) final;

  // expected-error@+1:11 {{'Refused::put' has a non-public overload 'put(const std::string&)': idem::guarded<Refused> keeps every overload callable with `using Refused::put;`, which would change its access; make the overloads public or rename one}}
  [[idem::idempotent(key = "event.id")]] void put(const Event& event);

  [[idem::idempotent(key = "event.id")]] virtual void on(const Event& event, int times = 1);

  // expected-error@+1:11 {{the default argument of 'times' uses the private 'Refused::kSecret', which idem::guarded<Refused> cannot evaluate; make it protected or public}}
  [[idem::idempotent(key = "event.id")]] void secret(const Event& event, int times = kSecret);

 protected:
  // expected-error@+1:11 {{'Refused::hook' is protected: the generated idem::policy, idem::invoke and the registration cannot name it outside the class; make it public}}
  [[idem::idempotent(key = "event.id")]] void hook(const Event& event);

 private:
  void put(const std::string& text);
  static constexpr int kSecret = 2;
};

class Sealed : public Refused {
 public:
  // expected-error@+1:8 {{'Sealed::on' is final, so idem::guarded<Sealed> cannot guard the annotated 'Refused::on' it overrides; remove final, or make Sealed final (then only idem::invoke guards it)}}
  void on(const Event& event, int times = 1) final;
};

class Other : public Refused {
 public:
  // expected-error@+1:8 {{'Other::on' overrides the annotated 'Refused::on' with other default arguments, which idem::guarded<Other> cannot keep; give both the same default arguments, or annotate the override}}
  void on(const Event& event, int times = 2) override;
};

// A final class has no idem::guarded<C>: a final method in it is fine, idem::invoke guards it.
class Closed final {
 public:
  [[idem::idempotent(key = "event.id")]] virtual void on(const Event& event) final;
};

// idem::invoke throws outside the function: noexcept is fine where there is no guarded<C>.
[[idem::idempotent(key = "event.id")]] void quiet_free(const Event& event) noexcept;
struct Statics {
  [[idem::idempotent(key = "event.id", scope = "Statics.quiet")]] static void quiet(const Event& event) noexcept;
};
