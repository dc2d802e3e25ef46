// tests/redis_cluster/cluster_support.cpp — the Redis Clusters the cluster tests run against.
#include "cluster_support.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <catch2/catch.hpp>

#include <idem/lease_token.hpp>

namespace idem::cluster_test {
using namespace std::chrono_literals;

namespace {

std::vector<std::string> read_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  if (lines.empty()) throw std::runtime_error("cannot read " + file.string() + ": did the cluster start?");
  return lines;
}

void run_script(const std::string& args) {
  const std::string command = std::string("bash '") + IDEM_REDIS_CLUSTER_SCRIPT + "' " + args + " >/dev/null";
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

int port_of(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

}  // namespace

cluster::cluster(fixture_tag) {
  const char* dir = std::getenv("IDEM_REDIS_CLUSTER_DIR");
  if (dir == nullptr || *dir == '\0') {
    throw std::runtime_error("IDEM_REDIS_CLUSTER_DIR is not set: run the cluster tests through ctest");
  }
  dir_ = dir;
  seeds_ = read_lines(dir_ / "seeds");
}

cluster::cluster() : owned_(true) {
  dir_ = std::filesystem::temp_directory_path() / ("idem-cluster-" + lease_token::generate().to_string().substr(0, 12));
  run_script("start '" + dir_.string() + "'");
  seeds_ = read_lines(dir_ / "seeds");
}

cluster::~cluster() {
  connections_.clear();
  if (!owned_) return;
  try {
    run_script("stop '" + dir_.string() + "'");
  } catch (...) {
  }
}

redis_store_options cluster::options(std::string prefix) const {
  redis_store_options o;
  const std::string& first = seeds_.front();
  o.host = first.substr(0, first.rfind(':'));
  o.port = port_of(first);
  o.cluster.enabled = true;
  o.cluster.seeds.assign(seeds_.begin() + 1, seeds_.end());
  o.prefix = std::move(prefix);
  o.connect_timeout = 500ms;
  o.command_timeout = 2s;
  return o;
}

rd::reply_ptr cluster::run(const std::string& address, const std::vector<std::string>& args) {
  rd::connection* conn = nullptr;
  for (auto& [at, c] : connections_) {
    if (at == address && !c->broken()) conn = c.get();
  }
  if (conn == nullptr) {
    std::erase_if(connections_, [&](const auto& entry) { return entry.first == address; });
    rd::endpoint e;
    e.host = address.substr(0, address.rfind(':'));
    e.port = port_of(address);
    e.connect_timeout = 1s;
    e.command_timeout = 5s;
    connections_.emplace_back(address, std::make_unique<rd::connection>(e));
    conn = connections_.back().second.get();
  }
  rd::command cmd;
  for (const std::string& a : args) cmd.arg(a);
  return conn->run(cmd);
}

std::vector<node_info> cluster::nodes(const std::string& except) {
  for (const std::string& seed : seeds_) {
    if (seed == except) continue;
    std::string listing;
    try {
      rd::reply_ptr reply = run(seed, {"CLUSTER", "NODES"});
      if (reply->type != REDIS_REPLY_STRING) continue;
      listing.assign(rd::text(reply.get()));
    } catch (const rd::io_failure&) {
      continue;
    }
    std::vector<node_info> out;
    std::istringstream lines(listing);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream fields(line);
      node_info n;
      std::string address, flags, ping, pong, epoch, link;
      fields >> n.id >> address >> flags >> n.master_id >> ping >> pong >> epoch >> link;
      n.address = address.substr(0, address.find('@'));
      n.port = port_of(n.address);
      n.master = flags.find("master") != std::string::npos;
      n.failed = flags.find("fail") != std::string::npos;
      for (std::string range; fields >> range;) {
        if (range.starts_with("[")) continue;  // a slot being migrated or imported
        const auto dash = range.find('-');
        const int first = std::stoi(range.substr(0, dash));
        const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
        n.slots.emplace_back(first, last);
      }
      out.push_back(std::move(n));
    }
    return out;
  }
  throw std::runtime_error("no node of the cluster answers CLUSTER NODES");
}

node_info cluster::master_of(int slot, const std::string& except) {
  for (const node_info& n : nodes(except)) {
    if (!n.master || n.failed) continue;
    for (auto [first, last] : n.slots) {
      if (slot >= first && slot <= last) return n;
    }
  }
  throw std::runtime_error("no master serves slot " + std::to_string(slot));
}

std::size_t cluster::count_keys(const std::string& address, const std::string& pattern) {
  std::size_t count = 0;
  std::string cursor = "0";
  do {
    rd::reply_ptr reply = run(address, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    REQUIRE(reply->type == REDIS_REPLY_ARRAY);
    cursor = std::string(rd::text(reply->element[0]));
    count += reply->element[1]->elements;
  } while (cursor != "0");
  return count;
}

int cluster::pid_of(int port) const { return std::stoi(read_lines(dir_ / std::to_string(port) / "redis.pid").front()); }

bool cluster::healthy() {
  for (const node_info& n : nodes()) {
    if (n.failed) continue;
    try {
      rd::reply_ptr reply = run(n.address, {"CLUSTER", "INFO"});
      if (rd::text(reply.get()).find("cluster_state:ok") == std::string_view::npos) return false;
    } catch (const rd::io_failure&) {
      return false;
    }
  }
  return true;
}

std::string unique_prefix(std::string_view hint) {
  return "idem-cluster-test:" + std::string(hint) + ":" + lease_token::generate().to_string().substr(0, 12) + ":";
}

}  // namespace idem::cluster_test
