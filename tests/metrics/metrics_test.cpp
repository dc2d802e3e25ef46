// tests/metrics/metrics_test.cpp — idem::metrics: the exposition's syntax, and what an engine
// reports to it (every outcome, a timed store's operations and waits, the heartbeat, purges).
#include <catch2/catch.hpp>

#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/json_codec.hpp>
#include <idem/memory_store.hpp>
#include <idem/metrics.hpp>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "../../runtime/core/metrics_registry.hpp"
#include "../../runtime/core/prometheus_text.hpp"
#include "support/eventually.hpp"
#include "support/faulty_store.hpp"

using namespace std::chrono_literals;

namespace {

// The value of the one sample line that starts with `series` (name and labels), or -1.
double sample(const std::string& text, const std::string& series) {
  const std::string prefix = series + " ";
  std::size_t at = 0;
  double found = -1;
  int matches = 0;
  while ((at = text.find(prefix, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      found = std::stod(text.substr(at + prefix.size(), text.find('\n', at) - at - prefix.size()));
      ++matches;
    }
    at += prefix.size();
  }
  return matches == 1 ? found : -1;
}

std::string calls(std::string_view scope, std::string_view outcome) {
  return fmt::format("idem_calls_total{{scope=\"{}\",outcome=\"{}\"}}", scope, outcome);
}

// Set once; waited on with a bound.
class latch {
 public:
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  bool wait() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
};

}  // namespace

TEST_CASE("metrics: the exposition escapes label values and writes cumulative histograms", "[metrics]") {
  idem::detail::exposition_writer out;
  out.family("idem_x_total", "counter", "Help with a \\ backslash\nand a line feed.");
  out.sample("idem_x_total", {{"store", "a\"b\\c\nd"}}, std::uint64_t{7});
  out.family("idem_y_seconds", "histogram", "h");
  const double bounds[] = {0.001, 0.5};
  const std::uint64_t cumulative[] = {1, 3, 4};
  out.histogram("idem_y_seconds", {{"scope", "S"}}, bounds, cumulative, 1.25);
  CHECK(std::move(out).take() ==
        "# HELP idem_x_total Help with a \\\\ backslash\\nand a line feed.\n"
        "# TYPE idem_x_total counter\n"
        "idem_x_total{store=\"a\\\"b\\\\c\\nd\"} 7\n"
        "# HELP idem_y_seconds h\n"
        "# TYPE idem_y_seconds histogram\n"
        "idem_y_seconds_bucket{scope=\"S\",le=\"0.001\"} 1\n"
        "idem_y_seconds_bucket{scope=\"S\",le=\"0.5\"} 3\n"
        "idem_y_seconds_bucket{scope=\"S\",le=\"+Inf\"} 4\n"
        "idem_y_seconds_sum{scope=\"S\"} 1.25\n"
        "idem_y_seconds_count{scope=\"S\"} 4\n");
}

TEST_CASE("metrics: a histogram's bucket is the first bound at or above the duration", "[metrics]") {
  static constexpr double bounds[] = {0.001, 0.01};
  idem::detail::duration_histogram h(bounds);
  h.observe(1ms);       // le 0.001 (a bound is inclusive)
  h.observe(1001us);    // le 0.01
  h.observe(2s);        // +Inf
  h.observe(-5ms);      // a clock that went back counts as zero
  const auto r = h.read();
  CHECK(r.cumulative == std::vector<std::uint64_t>{2, 3, 4});
  CHECK(r.sum_seconds == Approx(2.002001));
}

TEST_CASE("metrics: every outcome of a call is counted under its scope, and keys never appear", "[metrics]") {
  auto metrics = std::make_shared<idem::metrics>();
  idem::memory_store store;
  idem::engine engine{store, {}, {.metrics = metrics}};
  const std::string scope = "Billing.settle";
  auto ctx = [&](const std::string& key) { return engine.make_context(scope, key, {.wait = 0ms}); };

  for (const char* key : {"key-alpha-1", "key-alpha-2", "key-alpha-3"})
    CHECK(engine.execute(ctx(key), [] { return 1; }, idem::json_codec{}).ran());
  for (const char* key : {"key-alpha-1", "key-alpha-2"})
    CHECK(engine.execute(ctx(key), [] { return 2; }, idem::json_codec{}).is_replay());
  CHECK_THROWS_AS(engine.execute(ctx("key-alpha-4"), []() -> int { throw std::runtime_error("declined"); },
                                 idem::json_codec{}),
                  std::runtime_error);

  latch held, finish;
  auto holder = std::async(std::launch::async, [&] {
    return engine.execute(ctx("key-alpha-5"), [&] {
      held.open();
      finish.wait();
    });
  });
  REQUIRE(held.wait());
  const std::string during = metrics->render();
  CHECK(engine.execute(ctx("key-alpha-5"), [] {}).is_in_flight());
  finish.open();
  CHECK(holder.get().ran());

  const std::string text = metrics->render();
  CHECK(sample(text, calls(scope, "executed")) == 4);
  CHECK(sample(text, calls(scope, "replayed")) == 2);
  CHECK(sample(text, calls(scope, "in_flight")) == 1);
  CHECK(sample(text, calls(scope, "failed")) == 1);
  CHECK(sample(during, "idem_calls_in_progress{scope=\"Billing.settle\"}") == 1);
  CHECK(sample(text, "idem_calls_in_progress{scope=\"Billing.settle\"}") == 0);
  CHECK(sample(text, "idem_leases_lost_total{scope=\"Billing.settle\"}") == 0);
  // The memory store is in-process: its operations are not timed, nor its duplicates' waits.
  CHECK(text.find("idem_store_operation_seconds") == std::string::npos);
  CHECK(sample(text, "idem_wait_seconds_count{scope=\"Billing.settle\"}") == 0);
  CHECK(sample(text, "idem_store_errors_total{store=\"memory_store\",operation=\"acquire\"}") == 0);
  CHECK(text.find("key-alpha") == std::string::npos);
}

TEST_CASE("metrics: a timed store's operations, failures and duplicates' waits are measured", "[metrics]") {
  auto metrics = std::make_shared<idem::metrics>();
  idem::test::faulty_store store;  // a real memory_store behind a decorator that is not in-process
  store.before_complete = [](const idem::identity& id) {
    if (id.scope() == "Orders.refuse") throw idem::store_unavailable_error("the disk is full", "complete", id.to_string());
  };
  idem::engine engine{store, {.failure_policy = idem::completion_failure_policy::propagate}, {.metrics = metrics}};

  for (const char* key : {"k1", "k2"})
    CHECK(engine.execute(engine.make_context("Orders.place", key), [] {}).ran());
  CHECK(engine.execute(engine.make_context("Orders.place", "k1"), [] {}).is_replay());
  CHECK_THROWS_AS(engine.execute(engine.make_context("Orders.refuse", "k3"), [] {}), idem::store_unavailable_error);

  const std::string text = metrics->render();
  const auto operation = [&](std::string_view op) {
    return sample(text, fmt::format("idem_store_operation_seconds_count{{store=\"memory_store\",operation=\"{}\"}}", op));
  };
  CHECK(operation("acquire") == 4);
  CHECK(operation("complete") == 3);  // the refused one included
  CHECK(operation("release") == 0);
  CHECK(sample(text, "idem_store_errors_total{store=\"memory_store\",operation=\"complete\"}") == 1);
  CHECK(sample(text, "idem_store_errors_total{store=\"memory_store\",operation=\"acquire\"}") == 0);
  CHECK(sample(text, "idem_wait_seconds_count{scope=\"Orders.place\"}") == 1);
  CHECK(sample(text, calls("Orders.refuse", "failed")) == 1);
  CHECK(sample(text,
               "idem_store_operation_seconds_bucket{store=\"memory_store\",operation=\"acquire\",le=\"+Inf\"}") == 4);
}

TEST_CASE("metrics: the heartbeat's extends and its failed extends are counted", "[metrics]") {
  auto metrics = std::make_shared<idem::metrics>();
  idem::test::faulty_store store;
  std::atomic<int> extends{0};
  latch retried;
  store.before_extend = [&](const idem::identity&) {
    const int n = ++extends;
    if (n == 1) throw idem::store_unavailable_error("timed out", "extend", "Orders.place/#00000000");
    if (n == 2) retried.open();
    return true;
  };
  idem::engine engine{store, {}, {.metrics = metrics}};
  CHECK(engine.execute(engine.make_context("Orders.place", "k", {.lease = 400ms}), [&] { REQUIRE(retried.wait()); })
            .ran());
  const std::string text = metrics->render();
  CHECK(sample(text, "idem_heartbeat_extends_total{store=\"memory_store\"}") >= 2);
  CHECK(sample(text, "idem_heartbeat_failures_total{store=\"memory_store\",reason=\"error\"}") == 1);
  CHECK(sample(text, "idem_heartbeat_failures_total{store=\"memory_store\",reason=\"lease_lost\"}") == 0);
  CHECK(sample(text, "idem_store_errors_total{store=\"memory_store\",operation=\"extend\"}") == 1);
}

TEST_CASE("metrics: a holder whose lease was taken over is counted as a lease lost", "[metrics]") {
  auto metrics = std::make_shared<idem::metrics>();
  idem::test::faulty_store store;
  store.before_extend = [](const idem::identity&) { return false; };  // a paused holder: no extension
  idem::engine engine{store, {.failure_policy = idem::completion_failure_policy::propagate}, {.metrics = metrics}};
  const auto ctx = engine.make_context("Orders.place", "k", {.lease = 50ms, .wait = 0ms});
  CHECK_THROWS_AS(engine.execute(ctx,
                                 [&] {
                                   // Another caller takes the record over once the lease lapsed.
                                   REQUIRE(idem::test::eventually(
                                       [&] { return std::holds_alternative<idem::acquired>(store.try_acquire(ctx)); },
                                       5s));
                                 }),
                  idem::lease_lost_error);
  const std::string text = metrics->render();
  CHECK(sample(text, "idem_leases_lost_total{scope=\"Orders.place\"}") == 1);
  CHECK(sample(text, calls("Orders.place", "failed")) == 1);
  CHECK(sample(text, "idem_store_errors_total{store=\"memory_store\",operation=\"complete\"}") == 0);
}

TEST_CASE("metrics: a record taken over from a lapsed lease and a fingerprint mismatch are counted", "[metrics]") {
  auto metrics = std::make_shared<idem::metrics>();
  idem::memory_store store;
  idem::engine engine{store, {}, {.metrics = metrics}};
  const std::string first(16, 'a');
  const std::string second(16, 'b');

  // A holder that stopped (no engine, so no heartbeat) and lets its lease lapse.
  (void)store.try_acquire(engine.make_context("Orders.place", "crashed", {.lease = 30ms, .wait = 0ms}));
  const auto retry = engine.make_context("Orders.place", "crashed", {.wait = 0ms});
  REQUIRE(idem::test::eventually([&] { return engine.execute(retry, [] {}).ran(); }, 5s));
  CHECK(engine.execute(engine.make_context("Orders.place", "fresh"), [] {}).ran());

  CHECK(engine.execute(engine.make_context("Orders.refund", "r", {}, first), [] {}).ran());
  CHECK_THROWS_AS(engine.execute(engine.make_context("Orders.refund", "r", {}, second), [] {}),
                  idem::fingerprint_mismatch_error);
  CHECK(engine.execute(engine.make_context("Orders.refund", "r", {}, first), [] {}).is_replay());

  const std::string text = metrics->render();
  CHECK(sample(text, "idem_lease_steals_total{scope=\"Orders.place\"}") == 1);
  CHECK(sample(text, "idem_lease_steals_total{scope=\"Orders.refund\"}") == 0);
  CHECK(sample(text, "idem_fingerprint_mismatches_total{scope=\"Orders.refund\"}") == 1);
  CHECK(sample(text, "idem_fingerprint_mismatches_total{scope=\"Orders.place\"}") == 0);
  CHECK(sample(text, "idem_cache_hits_total{store=\"memory_store\"}") == 0);
}

TEST_CASE("metrics: scopes beyond max_scopes are counted under ~other", "[metrics]") {
  auto metrics = std::make_shared<idem::metrics>(idem::metrics_options{.max_scopes = 2});
  idem::memory_store store;
  idem::engine engine{store, {}, {.metrics = metrics}};
  for (const char* scope : {"A.one", "B.two", "C.three", "D.four"})
    CHECK(engine.execute(engine.make_context(scope, "k"), [] {}).ran());
  const std::string text = metrics->render();
  CHECK(sample(text, calls("A.one", "executed")) == 1);
  CHECK(sample(text, calls("B.two", "executed")) == 1);
  CHECK(sample(text, calls("~other", "executed")) == 2);
  CHECK(text.find("C.three") == std::string::npos);
  CHECK_THROWS_AS(idem::metrics(idem::metrics_options{.max_scopes = 0}), idem::configuration_error);
}

TEST_CASE("metrics: scheduled purges and the records they deleted are counted", "[metrics]") {
  auto metrics = std::make_shared<idem::metrics>();
  idem::test::faulty_store store;
  idem::engine engine{store, {.purge_interval = 20ms}, {.metrics = metrics}};
  CHECK(engine.execute(engine.make_context("Orders.place", "k", {.ttl = 1ms}), [] {}).ran());
  REQUIRE(idem::test::eventually(
      [&] { return sample(metrics->render(), "idem_purged_records_total{store=\"memory_store\"}") == 1; }, 10s));
  CHECK(sample(metrics->render(), "idem_purges_total{store=\"memory_store\"}") >= 1);
}

TEST_CASE("metrics: an asynchronous call is counted and timed like a blocking one", "[metrics]") {
  auto metrics = std::make_shared<idem::metrics>();
  idem::test::faulty_store store;
  idem::engine engine{store, {}, {.metrics = metrics}};
  for (int round = 0; round < 2; ++round) {
    std::promise<void> done;
    engine.async_run(
        engine.make_context("Orders.async", "k"), [](idem::async_done finished) { finished(nullptr); },
        [] { return idem::payload::none(); }, nullptr,
        [&](std::exception_ptr error, idem::raw_outcome) {
          if (error)
            done.set_exception(error);
          else
            done.set_value();
        });
    auto finished = done.get_future();
    REQUIRE(finished.wait_for(10s) == std::future_status::ready);
    finished.get();
  }
  const std::string text = metrics->render();
  CHECK(sample(text, calls("Orders.async", "executed")) == 1);
  CHECK(sample(text, calls("Orders.async", "replayed")) == 1);
  CHECK(sample(text, "idem_store_operation_seconds_count{store=\"memory_store\",operation=\"acquire\"}") == 2);
  CHECK(sample(text, "idem_store_operation_seconds_count{store=\"memory_store\",operation=\"complete\"}") == 1);
  CHECK(sample(text, "idem_wait_seconds_count{scope=\"Orders.async\"}") == 1);
}

TEST_CASE("metrics: threads reporting while a scraper renders lose no count", "[metrics][concurrency]") {
  auto metrics = std::make_shared<idem::metrics>();
  idem::test::faulty_store store;
  idem::engine engine{store, {}, {.metrics = metrics}};
  constexpr int threads = 4, calls_each = 500;
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop.load()) CHECK(!metrics->render().empty());
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      const std::string scope = t % 2 == 0 ? "Even.call" : "Odd.call";
      for (int i = 0; i < calls_each; ++i) {
        const std::string key = fmt::format("{}-{}", t, i % (calls_each / 2));
        (void)engine.execute(engine.make_context(scope, key), [] {});
      }
    });
  for (auto& w : workers) w.join();
  stop = true;
  scraper.join();
  const std::string text = metrics->render();
  for (const char* scope : {"Even.call", "Odd.call"}) {
    CHECK(sample(text, calls(scope, "executed")) == threads / 2 * calls_each / 2);
    CHECK(sample(text, calls(scope, "replayed")) == threads / 2 * calls_each / 2);
  }
  CHECK(sample(text, "idem_store_operation_seconds_count{store=\"memory_store\",operation=\"acquire\"}") ==
        threads * calls_each);
}
