// Privacy on the SQLite store: the main scenarios, a store whose write lock another connection
// holds (its completion fails), one on an unusable path, and the database file's own bytes.
#include "privacy/privacy_support.hpp"

#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include <idem/sqlite_store.hpp>

using namespace idem::privacy;

namespace {

std::filesystem::path fresh_dir(std::string_view hint) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("idem-privacy-" + std::string(hint) + "-" + idem::lease_token::generate().to_string());
  std::filesystem::create_directories(dir);
  return dir;
}

std::string file_bytes(const std::filesystem::path& path) {
  std::string out(std::filesystem::file_size(path), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  REQUIRE(in.gcount() == static_cast<std::streamsize>(out.size()));
  return out;
}

}  // namespace

TEST_CASE("sqlite store: no scenario reveals the key, and the file never holds it", "[privacy]") {
  const auto dir = fresh_dir("sqlite");
  const auto path = dir / "records.db";
  transcript t;
  {
    idem::sqlite_store store{path};
    run_store_scenarios(store, t, "Privacy");
    // The store's write lock held elsewhere: the completion fails after busy_timeout.
    idem::sqlite_store_options options;
    options.path = path;
    options.busy_timeout = std::chrono::milliseconds(20);
    idem::sqlite_store impatient{options};
    sqlite3* other = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
    run_completion_failure(impatient, t, "PrivacyDown", [&] {
      REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE; DELETE FROM idem_records WHERE 0;", nullptr, nullptr, nullptr) == SQLITE_OK);
    });
    REQUIRE(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(other);
    CHECK(t.contains("PrivacyDown.down/#"));
  }
  // Every byte SQLite wrote: the database, its WAL and shared memory, if left.
  std::size_t scanned = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string bytes = file_bytes(entry.path());
    scanned += bytes.size();
    INFO(entry.path());
    CHECK(bytes.find(secret) == std::string::npos);
  }
  CHECK(scanned > 0);
  t.require_clean(13);
  std::filesystem::remove_all(dir);
}

TEST_CASE("sqlite store: a store that cannot open says so without a key", "[privacy]") {
  transcript t;
  expect_error(t, "store down (open)", [] { idem::sqlite_store store{std::filesystem::path("/nonexistent-dir/x.db")}; });
  t.require_clean(1);
}
