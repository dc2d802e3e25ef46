// transaction = "required" over a transaction framework of the user's own, on the memory store:
// the wrapper begins the transaction before the claim, commits it after the method (the record is
// completed after the commit), rolls it back when the method throws (the key is freed), and joins
// the caller's transaction instead when one is active.
#include <catch2/catch.hpp>

#include <idem/engine.hpp>
#include <idem/memory_store.hpp>

#include "journal.idem.hpp"

using journal::book;

TEST_CASE("a required method runs in a transaction its wrapper begins and commits", "[annotator][e2e][transaction]") {
  idem::memory_store store;
  idem::engine engine{store};
  book b;
  journal::transaction_source transactions{&b};
  idem::guarded<journal::Journal> log{engine, transactions, &b};

  log.append(1);
  CHECK(b.entries == std::vector<int>{1});
  CHECK(b.begun == 1);
  CHECK(idem::current_transaction() == nullptr);
  log.append(1);  // a duplicate: replayed, in a transaction of its own that writes nothing
  CHECK(b.entries == std::vector<int>{1});
  CHECK(log.appends == 1);

  CHECK_THROWS_WITH(log.append(-2), "declined");
  CHECK(b.entries == std::vector<int>{1});  // its write rolled back
  CHECK(idem::current_transaction() == nullptr);
  CHECK_THROWS_WITH(log.append(-2), "declined");  // the key was freed: the retry runs again
  CHECK(log.appends == 3);
}

TEST_CASE("a required method joins the transaction its caller has active", "[annotator][e2e][transaction]") {
  idem::memory_store store;
  idem::engine engine{store};
  book b;
  journal::transaction_source transactions{&b};
  idem::guarded<journal::Journal> log{engine, transactions, &b};
  {
    journal::transaction tx{&b};
    log.append(3);
    log.append(4);
    CHECK(b.entries.empty());  // not before the caller's commit
    tx.commit();
  }
  CHECK(b.entries == std::vector<int>{3, 4});
  CHECK(b.begun == 1);  // the caller's only
  log.append(3);
  CHECK(log.appends == 2);  // the commit completed both records
}

TEST_CASE("an inherited required method needs the source too", "[annotator][e2e][transaction]") {
  idem::memory_store store;
  idem::engine engine{store};
  book b;
  journal::transaction_source transactions{&b};
  idem::guarded<journal::AuditedJournal> log{engine, transactions, &b};
  log.append(5);
  log.append(5);
  CHECK(b.entries == std::vector<int>{5});
  CHECK(b.begun == 2);
}

TEST_CASE("idem::invoke takes the source first for a free function that requires a transaction",
          "[annotator][e2e][transaction]") {
  idem::memory_store store;
  idem::engine engine{store};
  book b;
  journal::transaction_source transactions{&b};
  idem::invoke<&journal::append_entry>(engine, transactions, b, 7);
  idem::invoke<&journal::append_entry>(engine, transactions, b, 7);
  CHECK(b.entries == std::vector<int>{7});
  CHECK(idem::current_transaction() == nullptr);
}
