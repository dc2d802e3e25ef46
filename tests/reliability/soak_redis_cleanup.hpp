// tests/reliability/soak_redis_cleanup.hpp — deleting what a Redis soak run left under its prefix.
#pragma once

#include <hiredis/hiredis.h>

#include <string>

namespace idem::soak {

// Deletes every key under `prefix` on the Redis server at host:port (records and anything else
// the run left); on a cluster node, the keys that node holds. Best effort: a server that cannot be
// reached is left as it is.
inline void delete_prefix(const std::string& host, int port, const std::string& prefix) {
  redisContext* c = redisConnect(host.c_str(), port);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return;
  }
  std::string cursor = "0";
  const std::string pattern = prefix + "*";
  do {
    auto* reply = static_cast<redisReply*>(redisCommand(c, "SCAN %s MATCH %s COUNT 1000", cursor.c_str(), pattern.c_str()));
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
      if (reply != nullptr) freeReplyObject(reply);
      break;
    }
    cursor = reply->element[0]->str;
    const redisReply* keys = reply->element[1];
    for (std::size_t i = 0; i < keys->elements; ++i) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "UNLINK %b", keys->element[i]->str, keys->element[i]->len));
      if (r != nullptr) freeReplyObject(r);
    }
    freeReplyObject(reply);
  } while (cursor != "0");
  redisFree(c);
}

}  // namespace idem::soak
