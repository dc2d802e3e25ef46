// samples/orders — an order consumer that receives duplicated and concurrent deliveries.
//
// A broker redelivers, clients retry, load balancers replay: this sample does all three to an
// order consumer guarded by idem on the embedded memory store, and prints what ran, what was
// replayed and what was answered "in flight". It exits non-zero if any order ran twice.
#include <atomic>
#include <cstdio>
#include <latch>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <idem/idem.hpp>

using namespace std::chrono_literals;

namespace {

struct receipt {
  std::string order;
  int cents = 0;
  int run = 0;  // which execution produced it
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(receipt, order, cents, run)
};

// The business logic: charges an order and returns a receipt. Counts executions per order.
class order_consumer {
 public:
  receipt charge(const std::string& order, int cents) {
    std::lock_guard lock(mutex_);
    const int run = ++runs_[order];
    return receipt{order, cents, run};
  }
  std::map<std::string, int> runs() const {
    std::lock_guard lock(mutex_);
    return runs_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int> runs_;
};

const char* kind(const idem::outcome<receipt>& o) {
  if (o.ran()) return "ran     ";
  if (o.is_replay()) return "replayed";
  return "in flight";
}

}  // namespace

int main() {
  idem::memory_store store;
  idem::engine engine(store);
  order_consumer consumer;
  std::mutex print_mutex;
  int executed = 0, replayed = 0, in_flight = 0;

  auto deliver = [&](const std::string& label, const std::string& order, int cents, idem::call_options options,
                     auto&& action) {
    const auto ctx = engine.make_context("OrderConsumer.charge", order, options);
    const idem::outcome<receipt> o = engine.execute(ctx, action, idem::json_codec{});  // receipt, deduced
    std::lock_guard lock(print_mutex);
    if (o.has_value()) {
      const receipt& r = o.value();
      std::printf("  %-26s %s  %s  %s  %d cents (receipt of run #%d)\n", label.c_str(), kind(o), ctx.id.to_string().c_str(),
                  order.c_str(), r.cents, r.run);
    } else {
      std::printf("  %-26s %s  %s  %s  retry after %lld ms\n", label.c_str(), kind(o), ctx.id.to_string().c_str(),
                  order.c_str(), static_cast<long long>(o.retry_after().count()));
    }
    (o.ran() ? executed : o.is_replay() ? replayed : in_flight)++;
    (void)cents;
  };

  std::printf("1. The broker delivers every order three times:\n");
  for (int n = 1; n <= 3; ++n) {
    const std::string order = "order-" + std::to_string(n);
    for (int delivery = 1; delivery <= 3; ++delivery)
      deliver("delivery " + std::to_string(delivery), order, 100 * n, {},
              [&] { return consumer.charge(order, 100 * n); });
  }

  std::printf("2. Four consumers receive order-4 at the same moment (duplicates wait inside the store):\n");
  {
    std::latch go(4);
    std::vector<std::jthread> threads;
    for (int t = 1; t <= 4; ++t)
      threads.emplace_back([&, t] {
        go.arrive_and_wait();
        deliver("consumer " + std::to_string(t), "order-4", 400, {.wait = 10s}, [&] {
          std::this_thread::sleep_for(50ms);  // a slow payment gateway
          return consumer.charge("order-4", 400);
        });
      });
  }

  std::printf("3. A consumer that must not block (waitTimeout PT0S) meets order-5 in flight:\n");
  {
    std::latch started(1), finish(1);
    std::jthread slow([&] {
      deliver("slow first delivery", "order-5", 500, {}, [&] {
        started.count_down();
        finish.wait();
        return consumer.charge("order-5", 500);
      });
    });
    started.wait();
    deliver("redelivery", "order-5", 500, {.wait = 0ms}, [&] { return consumer.charge("order-5", 500); });
    finish.count_down();
  }
  deliver("redelivery after it ended", "order-5", 500, {.wait = 0ms}, [&] { return consumer.charge("order-5", 500); });

  std::printf("4. The gateway fails on the first attempt of order-6; the record is released and the retry runs:\n");
  try {
    deliver("attempt 1", "order-6", 600, {}, [&]() -> receipt { throw std::runtime_error("gateway timeout"); });
  } catch (const std::exception& e) {
    std::printf("  %-26s failed    (%s: the record was released)\n", "attempt 1", e.what());
  }
  deliver("attempt 2", "order-6", 600, {}, [&] { return consumer.charge("order-6", 600); });
  deliver("attempt 3", "order-6", 600, {}, [&] { return consumer.charge("order-6", 600); });

  std::printf("\nSummary: %d ran, %d replayed, %d answered in flight\n", executed, replayed, in_flight);
  bool once = true;
  for (const auto& [order, runs] : consumer.runs()) {
    std::printf("  %s ran %d time%s\n", order.c_str(), runs, runs == 1 ? "" : "s");
    once = once && runs == 1;
  }
  std::printf(once ? "Every order ran exactly once.\n" : "ERROR: an order ran more than once.\n");
  return once ? 0 : 1;
}
