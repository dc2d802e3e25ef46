// Table-driven tests of the one ISO-8601 duration parser.
#include <catch2/catch.hpp>

#include <idem/duration.hpp>
#include <idem/errors.hpp>

using namespace std::chrono_literals;

// The parser is constexpr: it must work at compile time, as idem-annotate relies on.
static_assert(idem::parse_duration("PT30S").value == 30s);
static_assert(idem::parse_duration("PT0.5S").value == 500ms);
static_assert(!idem::parse_duration("PT30").ok());

TEST_CASE("duration: valid inputs parse to milliseconds", "[duration]") {
  struct row {
    const char* text;
    std::chrono::milliseconds expected;
  };
  const row rows[] = {
      {"PT0S", 0ms},          {"PT30S", 30s},           {"PT5M", 5min},          {"PT1H", 1h},
      {"P1D", 24h},           {"P1DT12H", 36h},         {"PT1H30M", 90min},      {"PT0.5S", 500ms},
      {"PT0.001S", 1ms},      {"PT1.25S", 1250ms},      {"PT1,5S", 1500ms},      {"PT0.100S", 100ms},
      {"PT1.5000S", 1500ms},  {"pt30s", 30s},           {"P0D", 0ms},            {"PT24H", 24h},
      {"P2DT3H4M5.006S", 2 * 24h + 3h + 4min + 5s + 6ms},
      // The largest value is accepted exactly.
      {"PT9223372036854775.807S", std::chrono::milliseconds::max()},
  };
  for (const row& r : rows) {
    INFO(r.text);
    const auto result = idem::parse_duration(r.text);
    REQUIRE(result.ok());
    CHECK(result.value == r.expected);
  }
}

TEST_CASE("duration: invalid inputs report the offending position and why", "[duration]") {
  struct row {
    const char* text;
    std::size_t position;
    const char* message_part;
  };
  const row rows[] = {
      {"", 0, "empty"},
      {"P", 1, "at least one component"},
      {"PT", 2, "'T' must be followed"},
      {"30S", 0, "must start with 'P'"},
      {"-PT5S", 0, "signed"},
      {"+PT5S", 0, "signed"},
      {"PT-5S", 2, "signed"},
      {"P1Y", 2, "years, months and weeks"},
      {"P1M", 2, "years, months and weeks"},
      {"P2W", 2, "years, months and weeks"},
      {"PT30", 4, "without a designator"},
      {"PT5X", 3, "unknown designator"},
      {"PT1S1S", 5, "duplicate designator"},
      {"PT1M1H", 5, "out of order"},
      {"PT1S ", 4, "expected a number"},
      {"PT1SX", 4, "expected a number"},
      {"P1H", 2, "after 'T'"},
      {"PT1D", 3, "before 'T'"},
      {"PTT1S", 2, "duplicate 'T'"},
      {"PT0.0001S", 7, "finer than a millisecond"},
      {"PT1.S", 4, "digits after the decimal point"},
      {"PT1.5M", 3, "only seconds may have a fraction"},
      {"PT99999999999999999999S", 2, "too large"},
      {"P999999999999999D", 1, "too large"},
      {"PT9223372036854776S", 2, "too large"},
      // The whole seconds fit, the milliseconds do not (signed overflow before the fix).
      {"PT9223372036854775.999S", 2, "too large"},
      {"PT9223372036854775.808S", 2, "too large"},
      {"P1DT9223372036854775.807S", 4, "too large"},
      {"P1DT", 4, "'T' must be followed"},
  };
  for (const row& r : rows) {
    INFO(r.text);
    const auto result = idem::parse_duration(r.text);
    REQUIRE_FALSE(result.ok());
    CHECK(result.position == r.position);
    CHECK_THAT(std::string(result.message), Catch::Contains(r.message_part));
  }
}

TEST_CASE("duration: the throwing form names the field, the text and the position", "[duration]") {
  try {
    idem::parse_duration_or_throw("PT30", "config default_lease");
    FAIL("expected configuration_error");
  } catch (const idem::configuration_error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("config default_lease"));
    CHECK_THAT(message, Catch::Contains("\"PT30\""));
    CHECK_THAT(message, Catch::Contains("character 5"));
  }
}

TEST_CASE("duration: formatting round-trips through the parser", "[duration]") {
  const std::chrono::milliseconds values[] = {0ms, 1ms, 500ms, 30s, 5min, 1h, 24h, 36h, 90min, 2 * 24h + 3h + 4min + 5s + 6ms,
                                              std::chrono::milliseconds::max()};
  for (auto v : values) {
    const std::string text = idem::format_duration(v);
    INFO(text);
    const auto parsed = idem::parse_duration(text);
    REQUIRE(parsed.ok());
    CHECK(parsed.value == v);
  }
  CHECK(idem::format_duration(30s) == "PT30S");
  CHECK(idem::format_duration(500ms) == "PT0.5S");
  CHECK(idem::format_duration(0ms) == "PT0S");
  CHECK(idem::format_duration(36h) == "P1DT12H");
}
