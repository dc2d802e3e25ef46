// runtime/redis/purge.cpp — redis_store::purge_expired: SCAN pages of each master, and the purge
// script per hash slot.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "store_impl.hpp"

namespace idem {

// One node's share of purge_expired: pages of SCAN from the node's cursor, and for each page one
// purge script per hash slot among its keys (a script's keys must share a slot in a cluster),
// all pipelined in one round trip. A slot that moved meanwhile answers MOVED or ASK and is left
// to the next sweep of its new owner.
std::size_t redis_store::impl::purge_node(const target& t, rd::node& node) {
  const rd::decimal count(static_cast<std::int64_t>(options.purge_batch));
  const rd::decimal header_bytes(static_cast<std::int64_t>(rd::max_header_length));
  std::string& cursor = purge_cursors.try_emplace(&node, "0").first->second;
  std::size_t deleted = 0;
  for (std::size_t page = 0; page < options.purge_max_pages; ++page) {
    std::vector<std::string> keys;
    try {
      auto conn = node.pool.take();
      rd::command scan;
      scan.arg("SCAN").arg(cursor).arg("MATCH").arg(scan_pattern).arg("COUNT").arg(count.view());
      rd::reply_ptr reply = conn->run(scan);
      round_trips.fetch_add(1, std::memory_order_relaxed);
      if (reply->type == REDIS_REPLY_ERROR) unavailable(t, &node, "SCAN failed: " + std::string(rd::text(reply.get())));
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[1]->type != REDIS_REPLY_ARRAY) {
        unavailable(t, &node, "SCAN answered something other than a cursor and a page");
      }
      cursor = std::string(rd::text(reply->element[0]));
      const redisReply& page_keys = *reply->element[1];
      keys.reserve(page_keys.elements);
      for (std::size_t i = 0; i < page_keys.elements; ++i) keys.emplace_back(rd::text(page_keys.element[i]));
    } catch (const rd::io_failure& e) {
      unavailable(t, &node, e);
    }
    if (!keys.empty()) {
      const std::size_t n = purge_page(t, node, keys, header_bytes.view());
      deleted += n;
      if (n > 0 && options.replica_ack.replicas > 0) check_durability(t, wait_for_replicas(t, node));
    }
    if (cursor == "0") break;  // one full pass at most per call
  }
  return deleted;
}

// Deletes the expired records among `keys` (all on `node`), one script per hash slot, pipelined
// in one round trip (a single server: one script for the page). Scripts the node has not cached
// are sent again with EVAL; a group that the node redirects (its slot is moving) is skipped.
std::size_t redis_store::impl::purge_page(const target& t, rd::node& node, std::vector<std::string>& keys,
                                          std::string_view header_bytes) {
  std::vector<int> slots(keys.size());
  std::vector<std::size_t> order(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    slots[i] = slot_of(keys[i]);
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return slots[a] < slots[b]; });
  struct group {
    std::size_t first, last;  // into `order`
    rd::decimal numkeys;
  };
  std::vector<group> groups;
  for (std::size_t first = 0; first < order.size();) {
    std::size_t last = first + 1;
    while (last < order.size() && slots[order[last]] == slots[order[first]]) ++last;
    groups.push_back({first, last, rd::decimal(static_cast<std::int64_t>(last - first))});
    first = last;
  }
  const rd::script& script = rd::scripts().purge;
  auto commands_for = [&](bool use_eval) {
    std::vector<rd::command> commands(groups.size());
    for (std::size_t g = 0; g < groups.size(); ++g) {
      rd::command& cmd = commands[g];
      cmd.reserve(4 + groups[g].last - groups[g].first);
      if (use_eval) {
        cmd.arg("EVAL").arg(script.source);
      } else {
        cmd.arg("EVALSHA").arg(script.sha);
      }
      cmd.arg(groups[g].numkeys.view());
      for (std::size_t i = groups[g].first; i < groups[g].last; ++i) cmd.arg(keys[order[i]]);
      cmd.arg(header_bytes);
    }
    return commands;
  };
  std::size_t deleted = 0;
  for (bool use_eval : {false, true}) {
    std::vector<rd::command> commands = commands_for(use_eval);
    std::vector<rd::reply_ptr> replies(commands.size());
    try {
      auto conn = node.pool.take();
      conn->exchange(commands, replies);
    } catch (const rd::io_failure& e) {
      unavailable(t, &node, e);
    }
    round_trips.fetch_add(1, std::memory_order_relaxed);
    bool reload = false;
    for (const rd::reply_ptr& reply : replies) {
      if (reply->type == REDIS_REPLY_INTEGER) {
        deleted += static_cast<std::size_t>(std::max<long long>(0, reply->integer));
        continue;
      }
      const std::string_view message = rd::text(reply.get());
      if (reply->type == REDIS_REPLY_ERROR && message.starts_with("NOSCRIPT") && !use_eval) {
        reload = true;
        continue;
      }
      if (reply->type == REDIS_REPLY_ERROR && topo.cluster() &&
          (message.starts_with("MOVED ") || message.starts_with("ASK ") || message.starts_with("TRYAGAIN"))) {
        continue;  // the slot is moving: its new owner's sweep deletes these
      }
      if (reply->type == REDIS_REPLY_ERROR) unavailable(t, &node, "the purge script failed: " + std::string(message));
      unavailable(t, &node, "the purge script answered something other than a count");
    }
    if (!reload) break;
    // Only the groups that answered NOSCRIPT run again (the others deleted their keys already),
    // but resending all is harmless: a second pass finds nothing more to delete.
    script_reloads.fetch_add(1, std::memory_order_relaxed);
  }
  return deleted;
}

std::size_t redis_store::purge_expired() {
  impl& d = *impl_;
  const impl::target t{"purge_expired", nullptr};
  std::lock_guard lock(d.purge_mutex);
  std::vector<rd::node*> masters;
  try {
    masters = d.topo.masters();
  } catch (const rd::io_failure& e) {
    d.unavailable(t, nullptr, e);
  }
  std::size_t deleted = 0;
  for (rd::node* node : masters) deleted += d.purge_node(t, *node);
  return deleted;
}

}  // namespace idem
