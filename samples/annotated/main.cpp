// samples/annotated — duplicated and concurrent deliveries through generated wrappers.
//
// The consumer in order_consumer.hpp is annotated; idem_generate() turned the annotations into
// idem::guarded<orders::consumer>. This program redelivers, retries concurrently and redelivers
// during a running shipment, on the embedded memory store, and prints what ran, what was
// replayed and what was answered "in flight". It exits non-zero if any order ran twice.
#include <chrono>
#include <cstdio>
#include <future>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include <idem/idem.hpp>

#include "order_consumer.idem.hpp"

using namespace std::chrono_literals;

namespace {

void report_charge(const orders::delivery& d, const orders::receipt& r) {
  std::printf("  charge %-8s delivery %-4s %s (receipt from delivery %s)\n", d.order.c_str(), d.id.c_str(),
              r.charged_by == d.id ? "ran     " : "replayed", r.charged_by.c_str());
}

}  // namespace

int main() {
  idem::memory_store store;
  idem::engine engine{store};  // checks every generated policy against the store at startup
  idem::guarded<orders::consumer> consumer{engine};

  std::puts("1. a broker redelivers a charge:");
  for (const orders::delivery& d : {orders::delivery{"A-100", "m1", 1250}, orders::delivery{"A-100", "m2", 1250}})
    report_charge(d, consumer.charge(d));

  std::puts("2. four clients retry the same charge at once (duplicates wait for the first):");
  {
    std::latch start(4);
    std::vector<std::future<void>> callers;
    for (int i = 0; i < 4; ++i) {
      callers.push_back(std::async(std::launch::async, [&, i] {
        const orders::delivery d{"B-200", "c" + std::to_string(i), 990};
        start.arrive_and_wait();
        const orders::receipt r = consumer.charge(d);
        report_charge(d, r);
      }));
    }
    for (auto& c : callers) c.get();
  }

  std::puts("3. a redelivery arrives while the first shipment is still running:");
  {
    std::promise<void> shipping;
    std::promise<void> finish;
    std::shared_future<void> finished = finish.get_future().share();
    bool first = true;
    consumer.while_shipping = [&] {
      if (!first) return;
      first = false;
      shipping.set_value();
      finished.wait();
    };
    auto running = std::async(std::launch::async, [&] { consumer.ship({"C-300", "s1", 0}); });
    shipping.get_future().wait();
    try {
      consumer.ship({"C-300", "s2", 0});
      std::puts("  ship   C-300    delivery s2   ran (unexpected)");
    } catch (const idem::in_flight_error& e) {
      std::printf("  ship   C-300    delivery s2   in flight: retry after %lld ms\n",
                  static_cast<long long>(e.retry_after().count()));
    }
    finish.set_value();
    running.get();
    std::puts("  ship   C-300    delivery s1   ran");
    consumer.ship({"C-300", "s3", 0});
    std::puts("  ship   C-300    delivery s3   replayed (nothing to return: skipped)");
  }

  int failures = 0;
  for (const auto& [order, count] : consumer.charges())
    if (count != 1) ++failures, std::printf("order %s was charged %d times\n", order.c_str(), count);
  for (const auto& [order, count] : consumer.shipments())
    if (count != 1) ++failures, std::printf("order %s was shipped %d times\n", order.c_str(), count);
  std::printf("%s: every order ran exactly once\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
