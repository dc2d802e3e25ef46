// tests/reliability/reliability_support.hpp — what the crash worker and its supervisor share: the
// store each one opens, and the "side effect" table or list the workers write to in the same
// database as the records (so a join-transaction effect and its record commit together).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <idem/store.hpp>

struct sqlite3;
typedef struct pg_conn PGconn;
struct redisContext;

namespace idem::reliability {

// Where one run keeps its records and effects.
//   kind "sqlite":   target = database file
//   kind "postgres": target = conninfo (with the run's search_path)
//   kind "redis":    target = "host:port/prefix"
struct target {
  std::string kind;
  std::string where;
};

std::unique_ptr<store> open_store(const target& t);

// One effect: key index `key` executed by worker incarnation `incarnation`.
struct effect {
  int key;
  int incarnation;
};

// The application's own connection to the same database, for effects.
class effects {
 public:
  explicit effects(const target& t);
  ~effects();
  effects(const effects&) = delete;
  effects& operator=(const effects&) = delete;

  void create();                         // the effects table (SQL stores); nothing for Redis
  void record(int key, int incarnation);  // autocommit, or inside the open transaction
  std::vector<effect> all();

  sqlite3* sqlite() const noexcept { return sqlite_; }
  PGconn* postgres() const noexcept { return pg_; }

 private:
  target target_;
  sqlite3* sqlite_ = nullptr;
  PGconn* pg_ = nullptr;
  redisContext* redis_ = nullptr;
  std::string prefix_;
};

std::pair<std::string, int> split_host_port(const std::string& host_port);

}  // namespace idem::reliability
