// tests/sqlite/sqlite_test_support.cpp
#include "sqlite_test_support.hpp"

#include <sqlite3.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace idem::sqlite_test {
namespace {

struct temporary_directory {
  temporary_directory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "idem-sqlite-XXXXXX").string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("cannot create a temporary directory");
    path = buffer.data();
  }
  ~temporary_directory() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::filesystem::path path;
};

}  // namespace

const std::filesystem::path& temp_dir() {
  static const temporary_directory dir;
  return dir.path;
}

std::filesystem::path fresh_db_path(std::string_view hint) {
  static std::atomic<unsigned> counter{0};
  return temp_dir() / (std::string(hint) + "-" + std::to_string(++counter) + ".db");
}

sqlite_store_options options_for(const std::filesystem::path& path) {
  sqlite_store_options options;
  options.path = path;
  return options;
}

void connection_closer::operator()(sqlite3* db) const noexcept {
  sqlite3_close_v2(db);
}

connection open_connection(const std::filesystem::path& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  connection db(raw);
  INFO("opening " << path);
  REQUIRE(rc == SQLITE_OK);
  sqlite3_busy_timeout(raw, 5000);
  return db;
}

void exec(sqlite3* db, std::string_view sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db, std::string(sql).c_str(), nullptr, nullptr, &error);
  const std::string message = error != nullptr ? error : "";
  sqlite3_free(error);
  INFO(sql << ": " << message);
  REQUIRE(rc == SQLITE_OK);
}

long long query_int(sqlite3* db, std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, std::string(sql).c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  const int rc = sqlite3_step(stmt);
  const long long value = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  INFO(sql);
  REQUIRE(rc == SQLITE_ROW);
  return value;
}

}  // namespace idem::sqlite_test
