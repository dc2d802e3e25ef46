// runtime/redis/topology.cpp — one node, or the masters of a Redis Cluster and their slot map.
#include "topology.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

namespace idem::detail::redis {
namespace {

// The value of `name` in a RESP2 map (an array of alternating names and values), or null.
const redisReply* member(const redisReply& map, std::string_view name) {
  if (map.type != REDIS_REPLY_ARRAY) return nullptr;
  for (std::size_t i = 0; i + 1 < map.elements; i += 2) {
    if (text(map.element[i]) == name) return map.element[i + 1];
  }
  return nullptr;
}

}  // namespace

bool parse_address(std::string_view address, std::string& host, int& port) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view digits = address.substr(colon + 1);
  int value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size() || value < 1 || value > 65535) return false;
  host.assign(address.substr(0, colon));
  port = value;
  return true;
}

node::node(endpoint where, std::size_t pool_size, bool sharded, store_loop& loop)
    : address(where.describe()), pool(where, pool_size, loop), hub(where, sharded) {}

topology::topology(endpoint where, std::size_t pool_size, store_loop& loop)
    : cluster_(false), base_(where), pool_size_(pool_size), loop_(loop) {
  nodes_.push_back(std::make_unique<node>(std::move(where), pool_size, false, loop_));
  for (auto& slot : slots_) slot.store(nodes_.front().get(), std::memory_order_relaxed);
  loaded_.store(true, std::memory_order_release);
}

topology::topology(endpoint base, std::vector<std::string> seeds, std::size_t pool_size, store_loop& loop)
    : cluster_(true), base_(std::move(base)), pool_size_(pool_size), seeds_(std::move(seeds)), loop_(loop) {}

node& topology::owner(int slot) {
  if (!loaded_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mutex_);
    if (!loaded_.load(std::memory_order_relaxed)) load_locked();
  }
  node* found = slots_[static_cast<std::size_t>(slot)].load(std::memory_order_acquire);
  if (found == nullptr) {
    refresh(false);
    found = slots_[static_cast<std::size_t>(slot)].load(std::memory_order_acquire);
    if (found == nullptr) {
      throw io_failure("no master serves hash slot " + std::to_string(slot) +
                       " (the cluster is down or being reconfigured)");
    }
  }
  return *found;
}

node* topology::known_owner(int slot) const noexcept {
  if (!loaded_.load(std::memory_order_acquire)) return nullptr;
  return slots_[static_cast<std::size_t>(slot)].load(std::memory_order_acquire);
}

node& topology::moved(int slot, std::string_view address, const node& asked) {
  node& now_serving = at(address, asked);
  slots_[static_cast<std::size_t>(slot)].store(&now_serving, std::memory_order_release);
  try {
    refresh(false);  // one MOVED usually means more slots moved (a resharding, a failover)
  } catch (const io_failure&) {
    // The patched slot is enough for this call; the next redirection tries again.
  }
  return *slots_[static_cast<std::size_t>(slot)].load(std::memory_order_acquire);
}

node& topology::at(std::string_view address, const node& asked) {
  std::string host;
  int port = 0;
  if (!parse_address(address, host, port)) {
    throw io_failure("the cluster redirected to an address that is not host:port: \"" + std::string(address) + "\"");
  }
  if (host.empty()) {  // Redis names itself ":port" when it does not know its own address
    std::string asked_host;
    int asked_port = 0;
    parse_address(asked.address, asked_host, asked_port);
    host = asked_host;
  }
  std::lock_guard lock(mutex_);
  return node_at_locked(host, port);
}

node& topology::node_at_locked(std::string_view host, int port) {
  const std::string address = std::string(host) + ":" + std::to_string(port);
  for (const auto& n : nodes_) {
    if (n->address == address) return *n;
  }
  endpoint where = base_;
  where.host.assign(host);
  where.port = port;
  where.database = 0;
  nodes_.push_back(std::make_unique<node>(std::move(where), pool_size_, true, loop_));
  return *nodes_.back();
}

void topology::refresh(bool force) {
  if (!cluster_) return;
  std::lock_guard lock(mutex_);
  if (!force && loaded_.load(std::memory_order_relaxed) &&
      std::chrono::steady_clock::now() - last_refresh_ < refresh_interval) {
    return;
  }
  load_locked();
}

void topology::load_locked() {
  // Ask the nodes known to serve slots first, then the seeds, then every other node seen.
  std::vector<node*> candidates;
  auto add = [&](node* n) {
    if (n != nullptr && std::find(candidates.begin(), candidates.end(), n) == candidates.end()) candidates.push_back(n);
  };
  for (const auto& slot : slots_) add(slot.load(std::memory_order_relaxed));
  for (const std::string& seed : seeds_) {
    std::string host;
    int port = 0;
    if (parse_address(seed, host, port)) add(&node_at_locked(host, port));
  }
  for (const auto& n : nodes_) add(n.get());
  // Nodes whose connections failed within the last few seconds go last, in their order.
  const std::int64_t recent =
      (std::chrono::steady_clock::now() - std::chrono::seconds(5)).time_since_epoch().count();
  std::vector<node*> ordered;
  ordered.reserve(candidates.size());
  for (const bool failed_lately : {false, true}) {
    for (node* n : candidates) {
      if ((n->failed_at.load(std::memory_order_relaxed) >= recent) == failed_lately) ordered.push_back(n);
    }
  }
  candidates.swap(ordered);

  std::string last_failure = "no node to ask";
  for (node* n : candidates) {
    try {
      auto conn = n->pool.take();
      command cmd;
      cmd.arg("CLUSTER").arg("SHARDS");
      reply_ptr reply = conn->run(cmd);
      if (reply->type == REDIS_REPLY_ERROR) {
        last_failure = n->address + " answered CLUSTER SHARDS with: " + std::string(text(reply.get()));
        continue;
      }
      if (!apply_shards_locked(*reply)) {
        last_failure = n->address + " answered CLUSTER SHARDS with a map this store cannot read";
        continue;
      }
      last_refresh_ = std::chrono::steady_clock::now();
      refreshes_.fetch_add(1, std::memory_order_relaxed);
      loaded_.store(true, std::memory_order_release);
      return;
    } catch (const io_failure& e) {
      note_failure(*n);
      last_failure = n->address + ": " + e.what();
    }
  }
  last_refresh_ = std::chrono::steady_clock::now();  // do not hammer a cluster that is down
  throw io_failure("cannot learn the cluster's slot map: " + last_failure);
}

bool topology::apply_shards_locked(const redisReply& shards) {
  if (shards.type != REDIS_REPLY_ARRAY) return false;
  std::vector<node*> map(slot_count, nullptr);
  for (std::size_t s = 0; s < shards.elements; ++s) {
    const redisReply& shard = *shards.element[s];
    const redisReply* slots = member(shard, "slots");
    const redisReply* members = member(shard, "nodes");
    if (slots == nullptr || members == nullptr || slots->type != REDIS_REPLY_ARRAY ||
        members->type != REDIS_REPLY_ARRAY || slots->elements % 2 != 0) {
      return false;
    }
    if (slots->elements == 0) continue;  // a shard without slots (a new, empty master)
    node* master = nullptr;
    for (std::size_t m = 0; m < members->elements && master == nullptr; ++m) {
      const redisReply& entry = *members->element[m];
      const redisReply* role = member(entry, "role");
      const redisReply* port = member(entry, "port");
      if (role == nullptr || text(role) != "master" || port == nullptr || port->type != REDIS_REPLY_INTEGER) continue;
      const redisReply* where = member(entry, "endpoint");
      std::string_view host = where == nullptr ? std::string_view() : text(where);
      if (host.empty() || host == "?") {
        const redisReply* ip = member(entry, "ip");
        host = ip == nullptr ? std::string_view() : text(ip);
      }
      if (host.empty() || port->integer < 1 || port->integer > 65535) continue;
      master = &node_at_locked(host, static_cast<int>(port->integer));
    }
    if (master == nullptr) continue;  // no master known for these slots: they stay unserved
    for (std::size_t r = 0; r < slots->elements; r += 2) {
      const redisReply* first = slots->element[r];
      const redisReply* last = slots->element[r + 1];
      if (first->type != REDIS_REPLY_INTEGER || last->type != REDIS_REPLY_INTEGER || first->integer < 0 ||
          last->integer >= slot_count || first->integer > last->integer) {
        return false;
      }
      for (long long i = first->integer; i <= last->integer; ++i) map[static_cast<std::size_t>(i)] = master;
    }
  }
  for (std::size_t i = 0; i < map.size(); ++i) slots_[i].store(map[i], std::memory_order_release);
  return true;
}

void topology::note_failure(node& n) noexcept {
  n.failed_at.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

std::vector<node*> topology::masters() {
  if (!loaded_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mutex_);
    if (!loaded_.load(std::memory_order_relaxed)) load_locked();
  }
  std::vector<node*> out;
  for (const auto& slot : slots_) {
    node* n = slot.load(std::memory_order_acquire);
    if (n != nullptr && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

std::vector<node*> topology::nodes() const {
  std::lock_guard lock(mutex_);
  std::vector<node*> out;
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::uint64_t topology::connections_opened() const noexcept {
  std::lock_guard lock(mutex_);
  std::uint64_t sum = 0;
  for (const auto& n : nodes_) sum += n->pool.opened();
  return sum;
}

std::uint64_t topology::subscriber_connects() const noexcept {
  std::lock_guard lock(mutex_);
  std::uint64_t sum = 0;
  for (const auto& n : nodes_) sum += n->hub.connects();
  return sum;
}

std::uint64_t topology::messages() const noexcept {
  std::lock_guard lock(mutex_);
  std::uint64_t sum = 0;
  for (const auto& n : nodes_) sum += n->hub.messages();
  return sum;
}

}  // namespace idem::detail::redis
