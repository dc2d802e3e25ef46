// A function that must complete inside the caller's transaction: an engine on a store that
// cannot do that refuses to start.
#pragma once

struct Transfer {
  long id;
};

[[idem::idempotent(key = "t.id", completion = "join-transaction")]] void post_transfer(const Transfer& t);
