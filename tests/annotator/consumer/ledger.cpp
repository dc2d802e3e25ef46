#include "ledger.hpp"

#include <idem/idem.hpp>

#include "ledger.idem.hpp"

namespace {
int posted = 0;
}

void post_entry(const entry&) { ++posted; }

int post_twice() {
  idem::memory_store store;
  idem::engine engine{store};
  idem::invoke<&post_entry>(engine, entry{7});
  idem::invoke<&post_entry>(engine, entry{7});
  return posted;
}
