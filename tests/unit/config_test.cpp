#include <catch2/catch.hpp>

#include <idem/config.hpp>
#include <idem/errors.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace std::chrono_literals;

TEST_CASE("config: defaults are those of the reference", "[config]") {
  const idem::config c;
  CHECK(c.default_ttl == 24h);
  CHECK(c.default_lease == 30s);
  CHECK(c.default_wait == 10s);
  CHECK(c.default_completion == idem::completion_mode::autonomous);
  CHECK(c.failure_policy == idem::completion_failure_policy::propagate);
  CHECK_NOTHROW(c.validate());
}

TEST_CASE("config: out-of-range values name the field, the value and the fix", "[config]") {
  idem::config c;
  c.default_ttl = 0ms;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("default_ttl") && Catch::Contains("PT0S") && Catch::Contains("PT24H"));
  c = {};
  c.default_lease = 1ms;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("default_lease") && Catch::Contains("PT0.001S"));
  c = {};
  c.default_wait = -5ms;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("default_wait") && Catch::Contains("PT0S"));
}

TEST_CASE("config: read from JSON", "[config]") {
  const auto c = idem::config::from_json(R"({"default_ttl": "PT1H", "default_lease": "PT10S", "default_wait": "PT0S",
      "default_completion": "join-transaction", "failure_policy": "log_and_return"})");
  CHECK(c.default_ttl == 1h);
  CHECK(c.default_lease == 10s);
  CHECK(c.default_wait == 0ms);
  CHECK(c.default_completion == idem::completion_mode::join_transaction);
  CHECK(c.failure_policy == idem::completion_failure_policy::log_and_return);
  CHECK(idem::config::from_json("{}").default_ttl == 24h);
}

TEST_CASE("config: bad JSON fails with the member named", "[config]") {
  CHECK_THROWS_WITH(idem::config::from_json(R"({"default_lease": "PT30"})"),
                    Catch::Contains("default_lease") && Catch::Contains("\"PT30\"") && Catch::Contains("character 5"));
  CHECK_THROWS_WITH(idem::config::from_json(R"({"default_ttl": 30})"), Catch::Contains("default_ttl must be a string"));
  CHECK_THROWS_WITH(idem::config::from_json(R"({"default_tll": "PT1H"})"), Catch::Contains("unknown member \"default_tll\""));
  CHECK_THROWS_WITH(idem::config::from_json(R"({"default_completion": "joined"})"), Catch::Contains("join-transaction"));
  CHECK_THROWS_WITH(idem::config::from_json(R"({"failure_policy": "ignore"})"), Catch::Contains("log-and-return"));
  CHECK_THROWS_WITH(idem::config::from_json(R"({"default_lease": "PT0.001S"})"), Catch::Contains("at least 2 ms"));
  CHECK_THROWS_AS(idem::config::from_json("[1,2]"), idem::configuration_error);
  CHECK_THROWS_AS(idem::config::from_json("{not json"), idem::configuration_error);
}

TEST_CASE("config: read from a file, and a missing file is named", "[config]") {
  const auto path = std::filesystem::temp_directory_path() / "idem-config-test.json";
  {
    std::ofstream out(path);
    out << R"({"default_wait": "PT2S"})";
  }
  CHECK(idem::config::from_json_file(path).default_wait == 2s);
  std::filesystem::remove(path);
  CHECK_THROWS_WITH(idem::config::from_json_file(path), Catch::Contains("idem-config-test.json"));
}
