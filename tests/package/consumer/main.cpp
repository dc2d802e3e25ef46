// Links the runtime from an unpacked package, by CMake or by pkg-config: one call runs, its
// duplicate replays.
#include <cstdio>

#include <idem/idem.hpp>

int main() {
  idem::memory_store store;
  idem::engine engine{store};
  int runs = 0;
  const auto ctx = engine.make_context("Consumer.run", "order-1");
  const bool first = engine.execute(ctx, [&] { ++runs; }).ran();
  const bool second = engine.execute(ctx, [&] { ++runs; }).is_replay();
  std::printf("first ran: %d, second replayed: %d, runs: %d\n", first, second, runs);
  return first && second && runs == 1 ? 0 : 1;
}
