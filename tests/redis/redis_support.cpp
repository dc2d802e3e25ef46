// tests/redis/redis_support.cpp — the redis-server the tests run against, and raw access to it.
#include "redis_support.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <catch2/catch.hpp>

#ifdef IDEM_REDIS_TEST_EVENT_LOOP
#include "support/shared_io.hpp"
#endif

#include <idem/lease_token.hpp>

namespace idem::redis_test {
namespace rd = idem::detail::redis;
using namespace std::chrono_literals;

namespace {

address parse_address(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("malformed redis address \"" + text + "\"");
  return address{text.substr(0, colon), std::stoi(text.substr(colon + 1))};
}

std::string read_first_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line) || line.empty()) {
    throw std::runtime_error("cannot read " + file.string() + ": did the redis fixture start?");
  }
  return line;
}

void run_script(const std::string& args) {
  const std::string command = std::string("bash '") + IDEM_REDIS_SERVER_SCRIPT + "' " + args + " >/dev/null";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

}  // namespace

bool on_cluster() {
  const char* dir = std::getenv("IDEM_REDIS_CLUSTER_DIR");
  return dir != nullptr && *dir != '\0';
}

namespace {

std::vector<std::string> cluster_nodes() {
  std::ifstream in(std::filesystem::path(std::getenv("IDEM_REDIS_CLUSTER_DIR")) / "seeds");
  std::vector<std::string> nodes;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) nodes.push_back(line);
  }
  if (nodes.empty()) throw std::runtime_error("cannot read the cluster's seeds: did the redis_cluster fixture start?");
  return nodes;
}

bool is_cluster_seed(const address& where) {
  return on_cluster() && where.host + ":" + std::to_string(where.port) == cluster_nodes().front();
}

}  // namespace

address fixture_address() {
  if (on_cluster()) return parse_address(cluster_nodes().front());
  const char* dir = std::getenv("IDEM_REDIS_DIR");
  if (dir == nullptr || *dir == '\0') {
    throw std::runtime_error("IDEM_REDIS_DIR is not set: run the Redis tests through ctest, which starts the server");
  }
  return parse_address(read_first_line(std::filesystem::path(dir) / "address"));
}

std::string unique_prefix(std::string_view hint) {
  return "idem-test:" + std::string(hint) + ":" + lease_token::generate().to_string().substr(0, 12) + ":";
}


redis_store_options test_options(const address& where, std::string prefix) {
  redis_store_options o;
  o.host = where.host;
  o.port = where.port;
  o.prefix = std::move(prefix);
  o.connect_timeout = 500ms;
  o.command_timeout = 2s;
#ifdef IDEM_REDIS_TEST_EVENT_LOOP
  o.event_loop = idem::test::shared_test_event_loop();
#endif
  if (is_cluster_seed(where)) {
    const auto nodes = cluster_nodes();
    o.cluster.enabled = true;
    o.cluster.seeds.assign(nodes.begin() + 1, nodes.end());
  }
  return o;
}

context make_context(const identity& id, std::chrono::milliseconds wait) {
  using namespace std::chrono_literals;
  context ctx{.id = id, .ttl = 1h, .lease = 30s, .wait = wait};
  ctx.validate();
  return ctx;
}

std::unique_ptr<redis_store> fixture_store(std::string prefix) {
  return std::make_unique<redis_store>(test_options(fixture_address(), std::move(prefix)));
}

raw_redis::raw_redis(const address& where) {
  rd::endpoint e;
  e.host = where.host;
  e.port = where.port;
  e.connect_timeout = 2s;
  e.command_timeout = 5s;
  conn_ = std::make_unique<rd::connection>(e);
  cluster_ = is_cluster_seed(where);
}

rd::connection& raw_redis::connection_to(const std::string& node) {
  for (auto& [at, conn] : nodes_) {
    if (at == node) return *conn;
  }
  const address where = parse_address(node);
  rd::endpoint e;
  e.host = where.host;
  e.port = where.port;
  e.connect_timeout = 2s;
  e.command_timeout = 5s;
  nodes_.emplace_back(node, std::make_unique<rd::connection>(e));
  return *nodes_.back().second;
}

rd::reply_ptr raw_redis::run_on(rd::connection& conn, rd::command& cmd) {
  rd::reply_ptr reply = conn.run(cmd);
  // "MOVED <slot> <host:port>": the key lives on another master.
  for (int hop = 0; cluster_ && hop < 3 && reply->type == REDIS_REPLY_ERROR && rd::text(reply.get()).starts_with("MOVED ");
       ++hop) {
    const std::string_view message = rd::text(reply.get());
    reply = connection_to(std::string(message.substr(message.rfind(' ') + 1))).run(cmd);
  }
  return reply;
}

rd::reply_ptr raw_redis::run(std::initializer_list<std::string_view> args) {
  rd::command cmd;
  for (std::string_view a : args) cmd.arg(a);
  return run_on(*conn_, cmd);
}

rd::reply_ptr raw_redis::run(const std::vector<std::string>& args) {
  rd::command cmd;
  for (const std::string& a : args) cmd.arg(a);
  return run_on(*conn_, cmd);
}

rd::reply_ptr raw_redis::run_where(std::string_view key, const std::vector<std::string>& args) {
  if (!cluster_) return run(args);
  // EXISTS names the key's node by its MOVED answer (or is answered there).
  rd::command probe;
  probe.arg("EXISTS").arg(key);
  rd::reply_ptr reply = conn_->run(probe);
  rd::connection* target = conn_.get();
  if (reply->type == REDIS_REPLY_ERROR && rd::text(reply.get()).starts_with("MOVED ")) {
    const std::string_view message = rd::text(reply.get());
    target = &connection_to(std::string(message.substr(message.rfind(' ') + 1)));
  }
  rd::command cmd;
  for (const std::string& a : args) cmd.arg(a);
  return target->run(cmd);
}

std::string raw_redis::text(std::initializer_list<std::string_view> args) {
  rd::reply_ptr reply = run(args);
  INFO("reply: " << rd::text(reply.get()));
  REQUIRE(reply->type != REDIS_REPLY_ERROR);
  return std::string(rd::text(reply.get()));
}

long long raw_redis::integer(std::initializer_list<std::string_view> args) {
  rd::reply_ptr reply = run(args);
  INFO("reply: " << rd::text(reply.get()));
  REQUIRE(reply->type == REDIS_REPLY_INTEGER);
  return reply->integer;
}

std::vector<std::string> raw_redis::keys(std::string_view pattern) {
  std::vector<std::string> out;
  std::vector<rd::connection*> nodes{conn_.get()};
  if (cluster_) {  // every node: replicas answer SCAN with their master's keys, so dedupe
    nodes.clear();
    for (const std::string& node : cluster_nodes()) nodes.push_back(&connection_to(node));
  }
  for (rd::connection* node : nodes) {
    std::string cursor = "0";
    do {
      rd::command cmd;
      cmd.arg("SCAN").arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg("1000");
      rd::reply_ptr reply = node->run(cmd);
      REQUIRE(reply->type == REDIS_REPLY_ARRAY);
      cursor = std::string(rd::text(reply->element[0]));
      for (std::size_t i = 0; i < reply->element[1]->elements; ++i) out.emplace_back(rd::text(reply->element[1]->element[i]));
    } while (cursor != "0");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

private_server::private_server() {
  dir_ = std::filesystem::temp_directory_path() / ("idem-redis-test-" + lease_token::generate().to_string().substr(0, 12));
  run_script("start '" + dir_.string() + "'");
  port_ = std::stoi(read_first_line(dir_ / "port"));
}

private_server::~private_server() {
  try {
    run_script("stop '" + dir_.string() + "'");
  } catch (...) {
  }
}

void private_server::stop() { run_script("stop '" + dir_.string() + "'"); }

void private_server::start() { run_script("start '" + dir_.string() + "' " + std::to_string(port_)); }

}  // namespace idem::redis_test
