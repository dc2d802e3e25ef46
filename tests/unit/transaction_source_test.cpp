// The asynchronous steps of idem::basic_transaction_source, which a coroutine's transaction =
// "required" wrapper awaits: a blocking transaction's BEGIN, COMMIT and ROLLBACK run on idem's own
// threads, any other's on the calling thread.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include <idem/transaction.hpp>

namespace {

// Where and how often each step of the transactions on one "connection" ran.
struct journal {
  std::thread::id begun;
  std::thread::id committed;
  std::thread::id rolled_back;
  int rollbacks = 0;
  bool refuse_begin = false;
};

// An RAII transaction in the shape basic_transaction_source expects, recording its steps.
class recorded_transaction : public idem::basic_transaction {
 public:
  explicit recorded_transaction(journal* j) : recorded_transaction(j, idem::unbound) { binding_.emplace(*this); }
  recorded_transaction(journal* j, idem::unbound_t) : journal_(j) {
    if (j->refuse_begin) throw std::runtime_error("BEGIN refused");
    j->begun = std::this_thread::get_id();
  }
  ~recorded_transaction() override { rollback(); }
  void commit() {
    prepare_commit();
    journal_->committed = std::this_thread::get_id();
    finish_commit();
  }
  void rollback() noexcept {
    if (!active()) return;
    journal_->rolled_back = std::this_thread::get_id();
    ++journal_->rollbacks;
    finish_rollback();
  }

 private:
  journal* journal_;
  std::optional<idem::transaction_binding> binding_;
};

// The same steps, declared blocking.
class blocking_transaction : public recorded_transaction {
 public:
  using recorded_transaction::recorded_transaction;
};

template <class Tx>
using source_of = idem::basic_transaction_source<Tx, journal*>;

using opened_ptr = std::unique_ptr<idem::opened_transaction>;

// Runs a step and waits (bounded) for its report: the thread it reported from and its error.
struct report {
  std::thread::id thread;
  std::exception_ptr error;
  opened_ptr opened;
};

report begin_unbound(idem::transaction_source& source) {
  std::promise<report> reported;
  source.async_begin_unbound([&](std::exception_ptr error, opened_ptr opened) {
    reported.set_value({std::this_thread::get_id(), std::move(error), std::move(opened)});
  });
  auto answer = reported.get_future();
  REQUIRE(answer.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  return answer.get();
}

template <class Step>
report await_step(Step step) {
  std::promise<report> reported;
  step([&](std::exception_ptr error) { reported.set_value({std::this_thread::get_id(), std::move(error), nullptr}); });
  auto answer = reported.get_future();
  REQUIRE(answer.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  return answer.get();
}

}  // namespace

template <>
struct idem::is_blocking_transaction<blocking_transaction> : std::true_type {};

TEST_CASE("a blocking transaction's asynchronous steps run on idem's threads, not the caller's",
          "[transaction][async]") {
  journal j;
  source_of<blocking_transaction> source{&j};
  const auto caller = std::this_thread::get_id();

  report begun = begin_unbound(source);
  REQUIRE(begun.error == nullptr);
  REQUIRE(begun.opened != nullptr);
  CHECK(j.begun != caller);
  CHECK(idem::current_transaction() == nullptr);  // begun unbound

  bool committed = false;
  begun.opened->get().after_commit([&] { committed = true; });
  const report commit = await_step([&](idem::async_done done) { begun.opened->async_commit(std::move(done)); });
  CHECK(commit.error == nullptr);
  CHECK(committed);
  CHECK(j.committed != caller);
  CHECK(j.committed == commit.thread);

  report again = begin_unbound(source);
  REQUIRE(again.opened != nullptr);
  bool rolled_back = false;
  again.opened->get().after_rollback([&] { rolled_back = true; });
  const report rollback = await_step([&](idem::async_done done) { again.opened->async_rollback(std::move(done)); });
  CHECK(rollback.error == nullptr);
  CHECK(rolled_back);
  CHECK(j.rolled_back != caller);
  again.opened.reset();
  CHECK(j.rollbacks == 1);  // the destructor found nothing left to roll back
}

TEST_CASE("a blocking transaction that cannot begin reports why through the asynchronous step",
          "[transaction][async]") {
  journal j;
  j.refuse_begin = true;
  source_of<blocking_transaction> source{&j};
  report begun = begin_unbound(source);
  CHECK(begun.opened == nullptr);
  REQUIRE(begun.error != nullptr);
  CHECK_THROWS_WITH(std::rethrow_exception(begun.error), "BEGIN refused");
}

TEST_CASE("a transaction not declared blocking takes its asynchronous steps on the calling thread",
          "[transaction][async]") {
  journal j;
  source_of<recorded_transaction> source{&j};
  const auto caller = std::this_thread::get_id();

  report begun = begin_unbound(source);
  REQUIRE(begun.opened != nullptr);
  CHECK(begun.thread == caller);
  CHECK(j.begun == caller);
  const report commit = await_step([&](idem::async_done done) { begun.opened->async_commit(std::move(done)); });
  CHECK(commit.thread == caller);
  CHECK(j.committed == caller);

  // The default rollback step leaves the rollback to the destructor, on the thread that destroys it.
  report again = begin_unbound(source);
  const report rollback = await_step([&](idem::async_done done) { again.opened->async_rollback(std::move(done)); });
  CHECK(rollback.error == nullptr);
  CHECK(j.rollbacks == 0);
  again.opened.reset();
  CHECK(j.rollbacks == 1);
  CHECK(j.rolled_back == caller);
}
