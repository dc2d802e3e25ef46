// Compile-fail probe: dropping the result of engine.execute must warn ([[nodiscard]]), because the
// result says whether the work ran. Built twice by tests/compile/CMakeLists.txt: once as written
// (must compile cleanly) and once with IDEM_DROP_RESULT (must fail under -Werror=unused-result).
#include <idem/idem.hpp>

int probe() {
  idem::memory_store store;
  idem::engine engine{store};
  const idem::context ctx = engine.make_context("Probe.run", "k");
#ifdef IDEM_DROP_RESULT
  engine.execute(ctx, [] {});
#else
  const idem::outcome<void> result = engine.execute(ctx, [] {});
  return result.ran() ? 0 : 1;
#endif
  return 0;
}
