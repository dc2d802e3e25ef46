// Annotated code inside a SHARED library that links the static idem::runtime: the static
// libraries must be position-independent (thread_local state in a non-PIC libidem.a fails to
// link with R_X86_64_TPOFF32).
#pragma once

struct entry {
  long id;
};

[[idem::idempotent(key = "e.id")]] void post_entry(const entry& e);

// Runs post_entry twice for one id through an engine of its own; returns how often it ran.
int post_twice();
