// Privacy on the memory store: the main scenarios and a store that fails its completions (the
// failure is the test's faulty_store, what is checked is what the engine reports about it).
#include "privacy/privacy_support.hpp"

#include <idem/memory_store.hpp>

#include "support/faulty_store.hpp"

using namespace idem::privacy;

TEST_CASE("memory store: no scenario reveals the key in a log line or an exception", "[privacy]") {
  idem::memory_store store;
  transcript t;
  run_store_scenarios(store, t, "Privacy");
  t.require_clean(12);
}

TEST_CASE("memory store: a failing completion is reported without the key", "[privacy]") {
  idem::test::faulty_store store;
  transcript t;
  bool broken = false;
  store.before_complete = [&](const idem::identity& id) {
    if (broken) throw idem::store_unavailable_error("memory_store: cannot complete " + id.to_string(), "complete", id.to_string());
  };
  run_completion_failure(store, t, "Privacy", [&] { broken = true; });
  t.require_clean(1);
}

TEST_CASE("the scan finds the key raw and hex-encoded, so a clean transcript means something", "[privacy]") {
  CHECK(reveals(std::string("msg ") + std::string(secret) + " end"));
  CHECK(reveals("\\x" + hex(secret)));
  std::string upper = hex(secret);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(reveals(upper));
  CHECK_FALSE(reveals(idem::identity("Privacy.run", std::string(secret)).to_string()));
}
