// tests/reliability/soak_sqlite_test.cpp — the soak (soak.hpp) on a sqlite_store over a real file in
// a temporary directory. The store's file handles (database and -wal per pooled connection, one
// -shm) may grow once warm up to the pool's bound; its page caches may fill up to cache_size.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include <idem/sqlite_store.hpp>

#include "reliability/soak.hpp"

namespace fs = std::filesystem;

namespace {

struct scratch_dir {
  fs::path dir;
  scratch_dir() {
    std::string templ = (fs::temp_directory_path() / "idem-soak.XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir = fs::canonical(templ);  // what /proc/self/fd shows
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

}  // namespace

TEST_CASE("sqlite_store: bounded mixed traffic on a file leaks nothing and runs no completed key twice", "[soak]") {
  scratch_dir tmp;
  constexpr std::size_t connections = 4;
  idem::sqlite_store store{{.path = tmp.dir / "soak.db",
                            .connections = connections,
                            .synchronous = idem::sqlite_synchronous::normal}};
  idem::soak::store_probe probe;
  probe.file_prefix = (tmp.dir / "soak.db").string();
  probe.max_connections = 2 * connections + 1;  // database + WAL per connection, one shared -shm
  // SQLite's default page cache (cache_size -2000: 2000 KiB of pages, plus a header per page) per
  // connection, filling as the file grows.
  probe.heap_allowance = connections * (2000u * 1024u * 5u / 4u);
  idem::soak::run("sqlite_store", store, probe, idem::soak::settings::from_environment());
}
