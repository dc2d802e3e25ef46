// A header whose key expression stops compiling after generation (the parameter's type loses
// the member): the compiler's error must still point at the attribute, through #line.
#pragma once

struct Event {
  long id;
};

struct Listener {
  [[idem::idempotent(key = "event.id")]] void on(const Event& event);
};
