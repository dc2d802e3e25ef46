// Must not compile: idem::invoke of a member function on an idem::guarded<C>, which guards its
// methods itself (a virtual method would be guarded twice and wait for its own lease). Through a
// pointer, as through a reference.
#include <idem/engine.hpp>

#include "journal.idem.hpp"

void invoke_on_guarded(idem::engine& engine, journal::transaction_source& transactions,
                       idem::guarded<journal::Journal>& guarded) {
  idem::invoke<&journal::Journal::append>(engine, transactions, &guarded, 7);
}
