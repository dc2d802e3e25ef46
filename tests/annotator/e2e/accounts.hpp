// Classes idem::guarded<C> must guard on every call path without changing what compiles on C:
// inherited annotated methods, overloads, default arguments, names that clash with idem's own,
// nested classes of one name, a final class and an abstract base. Built through idem_generate.
#pragma once

#include <string>

// User types named like idem's own: generated code must spell idem's as ::idem::context.
struct context {
  long id;
};
struct error {
  long id;
};

namespace bank {

enum class Reason { normal, fraud };

struct Ticket {
  long id;
};

class Account {
 public:
  virtual ~Account() = default;

  // Default arguments: one of the namespace, one a member of the class.
  [[idem::idempotent(key = "t.id")]]
  virtual void refund(const Ticket& t, Reason reason = Reason::normal, int times = kTimes);

  // Annotated names with un-annotated overloads, which stay callable as on Account.
  [[idem::idempotent(key = "id")]] void log(int id);
  void log(double value) { doubles += value > 0 ? 1 : 0; }
  [[idem::idempotent(key = "id", scope = "Account.put")]] void put(int id);
  void put(const std::string& text) { texts += static_cast<int>(text.size()); }

  // A parameter named `policy`, parameter types named `context` and `error`.
  [[idem::idempotent(key = "c.id + e.id", scope = "Account.touch")]]
  void touch(const ::context& c, const ::error& e, int policy = 1);

  static constexpr int kTimes = 3;
  int refunds = 0;
  int logs = 0;
  int doubles = 0;
  int puts = 0;
  int texts = 0;
  int touches = 0;
  Reason last_reason = Reason::fraud;
};

// Annotates nothing itself: every annotated method is inherited, one through an override.
class Savings : public Account {
 public:
  void refund(const Ticket& t, Reason reason = Reason::normal, int times = kTimes) override;
  int savings_refunds = 0;
};

// A private base's annotated methods are not callable on the class: it gets no idem::guarded.
class Ledger : private Account {
 public:
  void close() { log(1); }
};

// Two nested classes of one name in one namespace.
struct Retail {
  struct Handler {
    [[idem::idempotent(key = "id", scope = "Retail.on")]] void on(int id);
    int runs = 0;
  };
};
struct Corporate {
  struct Handler {
    [[idem::idempotent(key = "id", scope = "Corporate.on")]] void on(int id);
    int runs = 0;
  };
};

// A final class: no idem::guarded<Vault> can derive from it; idem::invoke guards it.
class Vault final {
 public:
  [[idem::idempotent(key = "id")]] void open(int id);
  int opens = 0;
};

// An abstract base with an un-annotated pure virtual, and its concrete class.
class Channel {
 public:
  virtual ~Channel() = default;
  virtual std::string name() const = 0;
  [[idem::idempotent(key = "id")]] virtual void send(int id);
  int sent = 0;
};
class Email : public Channel {
 public:
  std::string name() const override { return "email"; }
};

}  // namespace bank

// noexcept where only idem::invoke guards: the duplicate's in_flight_error is thrown by invoke,
// outside the function.
namespace bank {
inline int audits = 0;
[[idem::idempotent(key = "id")]] void audit(int id) noexcept;
}  // namespace bank
