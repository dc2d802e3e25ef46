// tests/reliability/soak.hpp — the soak driver (ctest label `soak`, docs/reliability.md "Soak"):
// a bounded run of mixed traffic through idem::engine on one real store, with the process's
// resources measured after a warm-up and again at the end.
//
// The run, for one store object:
//   1. engine A: a waiter is made to block inside try_acquire once (so that the store's lazily
//      started waiting machinery exists), then warm-up traffic; engine A is destroyed;
//   2. measured: heap in use, threads, file descriptors, sockets, the store's counters ("warm");
//   3. engine B: the measured traffic for the configured duration; its thread count is checked
//      against the heartbeat pool's documented bound while it lives; every key that completed is
//      replayed (wait 0) and must answer its recorded value; expired records are purged;
//      engine B is destroyed;
//   4. measured again ("end"), and compared with (2).
// Destroying the engines joins their heartbeat and purge threads, so the thread comparison is
// exact: whatever the store itself started stays, and nothing else may.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <idem/store.hpp>

namespace idem::soak {

// The process's resources at one moment.
struct resources {
  std::optional<std::size_t> heap;  // mallinfo2 uordblks + hblkhd; empty under a sanitizer
  std::size_t threads = 0;          // entries of /proc/self/task
  std::size_t fds = 0;              // entries of /proc/self/fd (the directory's own fd excluded)
  std::size_t sockets = 0;          // of which readlink() starts with "socket:"
  std::size_t store_files = 0;      // of which readlink() starts with the store's file prefix
};

// Reads the resources; `file_prefix` (may be empty) names the store's files (SQLite: the database
// path, which also prefixes its -wal and -shm files).
resources measure(const std::string& file_prefix = {});

// What the driver knows about the store beyond the store interface.
struct store_probe {
  std::string file_prefix;  // see measure()
  // Connections the store may open lazily after the warm-up and keep (pool bounds): sockets for
  // PostgreSQL and Redis, file handles for SQLite.
  std::size_t max_connections = 0;
  // Pool connections opened so far (postgres_store / redis_store statistics()), or empty.
  std::function<std::uint64_t()> connections_opened;
  // Other counters that must not move once warm (the PostgreSQL LISTEN reconnects), or empty.
  std::function<std::uint64_t()> reconnects;
  // Records the store keeps in this process (memory_store::size()), or empty: remote stores.
  std::function<std::size_t()> records_in_process;
  // Heap the store may add on its own once warm, beyond the records (SQLite's page caches, which
  // fill up to cache_size per connection as the file grows).
  std::size_t heap_allowance = 0;
  // Keys the warm-up makes a duplicate wait on, one after the other, so that whatever the store
  // starts on a first wait exists before the measurement: a cluster store starts a subscriber per
  // master, so it needs keys on every master (enough random ones that missing one is negligible).
  std::size_t prime_waits = 1;
  // One more figure for the summary (e.g. the store's statistics), or empty.
  std::function<std::string()> extra;
};

struct settings {
  std::chrono::milliseconds duration;  // the measured traffic
  std::chrono::milliseconds warmup;
  int threads;
  // Environment: IDEM_SOAK_SECONDS (measured traffic, default 25) and IDEM_SOAK_THREADS (6). The
  // warm-up is a sixth of the duration, between 1 s and 5 s.
  static settings from_environment();
};

// Runs the soak on `backing`, checks everything with Catch2 and prints one summary line
// (prefixed "soak <name>:"), which it also returns.
std::string run(const std::string& name, store& backing, const store_probe& probe, const settings& s);

}  // namespace idem::soak
