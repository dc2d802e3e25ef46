// Must not compile: idem::invoke of a function annotated transaction = "required" without the
// idem::transaction_source that begins its transaction.
#include <idem/engine.hpp>

#include "journal.idem.hpp"

void invoke_without_source(idem::engine& engine, journal::book& b) { idem::invoke<&journal::append_entry>(engine, b, 7); }
