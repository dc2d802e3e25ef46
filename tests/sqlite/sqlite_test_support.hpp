// tests/sqlite/sqlite_test_support.hpp — temporary database files and raw connections for the
// SQLite store's tests.
#pragma once

#include <filesystem>
#include <idem/sqlite_store.hpp>
#include <memory>
#include <string_view>

struct sqlite3;

namespace idem::sqlite_test {

// A directory unique to this test process, created on first use and removed with everything in
// it when the process exits.
const std::filesystem::path& temp_dir();

// A path in temp_dir() no other call returned: `<hint>-<n>.db`. The file does not exist yet.
std::filesystem::path fresh_db_path(std::string_view hint);

// Options the tests use for `path`: the defaults.
sqlite_store_options options_for(const std::filesystem::path& path);

struct connection_closer {
  void operator()(sqlite3* db) const noexcept;
};
using connection = std::unique_ptr<sqlite3, connection_closer>;

// The application's own connection to `path`, with a 5 s busy timeout. Fails the case if it
// cannot open.
connection open_connection(const std::filesystem::path& path);

// Runs `sql` on `db`; fails the case on an error.
void exec(sqlite3* db, std::string_view sql);

// The number of rows `sql` (a SELECT of one integer) returns as its first column.
long long query_int(sqlite3* db, std::string_view sql);

}  // namespace idem::sqlite_test
