// tests/unit/small_function_test.cpp — detail::small_function, the type of idem's asynchronous
// handlers: what it keeps in place, and that copies, moves and destruction each happen once.
#include <idem/detail/small_function.hpp>

#include <array>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

namespace {

using handler = idem::detail::small_function<int(int)>;

// A lambda of the size of an asynchronous step's: a shared_ptr keeping a call alive, and more.
auto step_lambda(std::shared_ptr<int> kept) {
  return [kept = std::move(kept), error = std::exception_ptr()](int x) { return *kept + x + (error ? 1 : 0); };
}

// A callable larger than the object's storage.
auto large_lambda(std::shared_ptr<int> kept) {
  return [kept = std::move(kept), padding = std::array<char, 64>{}](int x) { return *kept + x + padding[0]; };
}

}  // namespace

TEST_CASE("a step callable is kept in place, and a larger one or one whose move may throw is not") {
  STATIC_REQUIRE(handler::keeps_in_place<decltype(step_lambda(nullptr))>);
  STATIC_REQUIRE_FALSE(handler::keeps_in_place<decltype(large_lambda(nullptr))>);
  struct throwing_move {
    throwing_move() = default;
    throwing_move(const throwing_move&) noexcept(false) {}
    int operator()(int x) const { return x; }
  };
  STATIC_REQUIRE_FALSE(handler::keeps_in_place<throwing_move>);
  handler f = throwing_move{};
  CHECK(f(7) == 7);
}

TEST_CASE("copies and moves share nothing, and each captured object is destroyed once") {
  for (bool large : {false, true}) {
    INFO((large ? "on the heap" : "in place"));
    auto kept = std::make_shared<int>(40);
    {
      handler f = large ? handler(large_lambda(kept)) : handler(step_lambda(kept));
      CHECK(kept.use_count() == 2);
      handler copy = f;
      CHECK(kept.use_count() == 3);
      handler moved = std::move(f);
      CHECK_FALSE(f);  // NOLINT(bugprone-use-after-move): a moved-from handler is empty
      CHECK(kept.use_count() == 3);
      CHECK(copy(2) == 42);
      CHECK(moved(1) == 41);
      copy = std::move(moved);
      CHECK(kept.use_count() == 2);
      copy = nullptr;
      CHECK(kept.use_count() == 1);
      copy = handler(step_lambda(kept));
      CHECK(copy(0) == 40);
    }
    CHECK(kept.use_count() == 1);
  }
}

TEST_CASE("an empty handler is false and throws bad_function_call, as std::function does") {
  handler empty;
  CHECK_FALSE(empty);
  CHECK_THROWS_AS(empty(1), std::bad_function_call);
  int (*null_function)(int) = nullptr;
  CHECK_FALSE(handler(null_function));
  CHECK_FALSE(handler(std::function<int(int)>()));
  CHECK(handler(std::function<int(int)>([](int x) { return -x; }))(3) == -3);
}

TEST_CASE("arguments are forwarded: a move-only argument moves through") {
  idem::detail::small_function<std::string(std::unique_ptr<std::string>)> take =
      [](std::unique_ptr<std::string> s) { return *s + "!"; };
  CHECK(take(std::make_unique<std::string>("moved")) == "moved!");
}
