// Links idem::runtime and idem::sqlite from a parent project: one call runs, its duplicate replays.
#include <cstdio>
#include <filesystem>

#include <idem/idem.hpp>
#include <idem/sqlite_store.hpp>

int main() {
  const auto path = std::filesystem::temp_directory_path() / "idem-subproject-consumer.db";
  std::filesystem::remove(path);
  idem::sqlite_store store{{.path = path.string()}};
  idem::engine engine{store};
  int runs = 0;
  const auto ctx = engine.make_context("Consumer.run", "order-1");
  const bool first = engine.execute(ctx, [&] { ++runs; }).ran();
  const bool second = engine.execute(ctx, [&] { ++runs; }).is_replay();
  std::printf("first ran: %d, second replayed: %d, runs: %d\n", first, second, runs);
  std::filesystem::remove(path);
  return first && second && runs == 1 ? 0 : 1;
}
