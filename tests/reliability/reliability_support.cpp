#include "reliability_support.hpp"

#include <algorithm>

#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <chrono>
#include <stdexcept>

#include <idem/postgres_store.hpp>
#include <idem/redis_store.hpp>
#include <idem/sqlite_store.hpp>

namespace idem::reliability {
namespace {

struct redis_target {
  std::string host;
  int port;
  std::string prefix;
  std::vector<std::string> more_nodes;  // a cluster's other nodes
};

// "host:port/prefix", or for a cluster "host:port,host:port,.../prefix".
redis_target parse_redis(const std::string& where) {
  const auto slash = where.find('/');
  if (slash == std::string::npos) throw std::runtime_error("redis target needs host:port/prefix");
  std::vector<std::string> nodes;
  for (std::size_t at = 0; at < slash;) {
    const std::size_t comma = std::min(where.find(',', at), slash);
    nodes.push_back(where.substr(at, comma - at));
    at = comma + 1;
  }
  auto [host, port] = split_host_port(nodes.front());
  return {host, port, where.substr(slash + 1), std::vector<std::string>(nodes.begin() + 1, nodes.end())};
}

void sqlite_exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message != nullptr ? message : "unknown";
    sqlite3_free(message);
    throw std::runtime_error("sqlite: " + text);
  }
}

std::string pg_exec(PGconn* conn, const std::string& sql, const std::vector<std::string>& params = {}) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  PGresult* r = PQexecParams(conn, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                             nullptr, 0);
  const auto status = PQresultStatus(r);
  std::string message = PQresultErrorMessage(r);
  PQclear(r);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) throw std::runtime_error("postgres: " + message);
  return message;
}

}  // namespace

std::pair<std::string, int> split_host_port(const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("malformed address " + host_port);
  return {host_port.substr(0, colon), std::stoi(host_port.substr(colon + 1))};
}

std::unique_ptr<store> open_store(const target& t) {
  using namespace std::chrono_literals;
  if (t.kind == "sqlite")
    return std::make_unique<sqlite_store>(
        sqlite_store_options{.path = t.where, .connections = 4, .synchronous = sqlite_synchronous::normal});
  if (t.kind == "postgres")
    return std::make_unique<postgres_store>(
        postgres_store_options{.conninfo = t.where, .pool_size = 4, .operation_timeout = 2s, .log = nullptr});
  if (t.kind == "redis" || t.kind == "redis_cluster") {
    auto r = parse_redis(t.where);
    redis_store_options options;
    options.host = r.host;
    options.port = r.port;
    options.prefix = r.prefix;
    options.cluster.enabled = t.kind == "redis_cluster";
    options.cluster.seeds = r.more_nodes;
    return std::make_unique<redis_store>(options);
  }
  throw std::runtime_error("unknown store kind " + t.kind);
}

effects::effects(const target& t) : target_(t) {
  if (t.kind == "sqlite") {
    if (sqlite3_open_v2(t.where.c_str(), &sqlite_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot open the effects database");
    sqlite3_busy_timeout(sqlite_, 10000);
  } else if (t.kind == "postgres") {
    pg_ = PQconnectdb(t.where.c_str());
    if (PQstatus(pg_) != CONNECTION_OK) throw std::runtime_error(std::string("postgres: ") + PQerrorMessage(pg_));
    PQsetNoticeProcessor(pg_, [](void*, const char*) {}, nullptr);
  } else if (t.kind == "redis" || t.kind == "redis_cluster") {
    auto r = parse_redis(t.where);
    prefix_ = "fx:" + r.prefix;
    redis_ = redisConnect(r.host.c_str(), r.port);
    if (redis_ == nullptr || redis_->err != 0) throw std::runtime_error("cannot connect to redis");
    // In a cluster the effects list lives on the master of its slot: its MOVED answer names it.
    auto* reply = static_cast<redisReply*>(redisCommand(redis_, "EXISTS %s%s", prefix_.c_str(), "effects"));
    if (reply == nullptr) throw std::runtime_error("redis EXISTS failed");
    const std::string answer = reply->type == REDIS_REPLY_ERROR ? std::string(reply->str, reply->len) : "";
    freeReplyObject(reply);
    if (answer.starts_with("MOVED ")) {
      auto [host, port] = split_host_port(answer.substr(answer.rfind(' ') + 1));
      redisFree(redis_);
      redis_ = redisConnect(host.c_str(), port);
      if (redis_ == nullptr || redis_->err != 0) throw std::runtime_error("cannot connect to the effects' node");
    }
  } else {
    throw std::runtime_error("unknown store kind " + t.kind);
  }
}

effects::~effects() {
  if (sqlite_ != nullptr) sqlite3_close_v2(sqlite_);
  if (pg_ != nullptr) PQfinish(pg_);
  if (redis_ != nullptr) redisFree(redis_);
}

void effects::create() {
  if (sqlite_ != nullptr) sqlite_exec(sqlite_, "CREATE TABLE IF NOT EXISTS effects (k INTEGER NOT NULL, inc INTEGER NOT NULL)");
  if (pg_ != nullptr) pg_exec(pg_, "CREATE TABLE IF NOT EXISTS effects (k integer NOT NULL, inc integer NOT NULL)");
}

void effects::record(int key, int incarnation) {
  if (sqlite_ != nullptr) {
    const std::string sql =
        "INSERT INTO effects (k, inc) VALUES (" + std::to_string(key) + ", " + std::to_string(incarnation) + ")";
    sqlite_exec(sqlite_, sql.c_str());
  } else if (pg_ != nullptr) {
    pg_exec(pg_, "INSERT INTO effects (k, inc) VALUES ($1, $2)", {std::to_string(key), std::to_string(incarnation)});
  } else {
    auto* reply = static_cast<redisReply*>(redisCommand(redis_, "RPUSH %s%s %d", prefix_.c_str(), "effects",
                                                        key * 100000 + incarnation));
    if (reply == nullptr) throw std::runtime_error("redis RPUSH failed");
    const bool ok = reply->type == REDIS_REPLY_INTEGER;
    freeReplyObject(reply);
    if (!ok) throw std::runtime_error("redis RPUSH refused");
  }
}

std::vector<effect> effects::all() {
  std::vector<effect> out;
  if (sqlite_ != nullptr) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(sqlite_, "SELECT k, inc FROM effects", -1, &st, nullptr) != SQLITE_OK)
      throw std::runtime_error("cannot read effects");
    while (sqlite3_step(st) == SQLITE_ROW) out.push_back({sqlite3_column_int(st, 0), sqlite3_column_int(st, 1)});
    sqlite3_finalize(st);
  } else if (pg_ != nullptr) {
    PGresult* r = PQexec(pg_, "SELECT k, inc FROM effects");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
      PQclear(r);
      throw std::runtime_error("cannot read effects");
    }
    for (int i = 0; i < PQntuples(r); ++i) out.push_back({std::stoi(PQgetvalue(r, i, 0)), std::stoi(PQgetvalue(r, i, 1))});
    PQclear(r);
  } else {
    auto* reply = static_cast<redisReply*>(redisCommand(redis_, "LRANGE %s%s 0 -1", prefix_.c_str(), "effects"));
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) throw std::runtime_error("cannot read effects");
    for (size_t i = 0; i < reply->elements; ++i) {
      const long v = std::stol(reply->element[i]->str);
      out.push_back({static_cast<int>(v / 100000), static_cast<int>(v % 100000)});
    }
    freeReplyObject(reply);
  }
  return out;
}

}  // namespace idem::reliability
