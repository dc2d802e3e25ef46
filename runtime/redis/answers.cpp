// runtime/redis/answers.cpp — what redis_store sends its scripts (the requests' keys and arguments)
// and how it reads what they answer: a claim, a replay, a holder, a refusal; a replay remembered
// by the local cache, and a waiter's answer read from the completion's message.
#include "store_impl.hpp"

#include <algorithm>
#include <utility>

namespace idem {

using std::chrono::milliseconds;

redis_store::impl::answer redis_store::impl::read_answer(const target& t, const redisReply& reply) {
  if (reply.type != REDIS_REPLY_STRING && reply.type != REDIS_REPLY_STATUS) unexpected(t);
  const std::string_view whole = rd::text(&reply);
  const std::size_t space = whole.find(' ');
  if (space == std::string_view::npos) return {whole, {}, whole};
  return {whole.substr(0, space), whole.substr(space + 1), whole};
}

std::pair<std::string_view, std::string_view> redis_store::impl::split(const target& t, std::string_view text) {
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) unexpected(t);
  return {text.substr(0, space), text.substr(space + 1)};
}

std::int64_t redis_store::impl::number(const target& t, std::string_view text) {
  auto value = rd::parse_int(text);
  if (!value) {
    throw corrupt_record_error("redis_store: cannot " + std::string(t.operation) + t.describe() +
                                   ": the record holds a malformed number",
                               std::string(t.operation), t.record());
  }
  return *value;
}

redis_store::impl::acquire_request::acquire_request(const impl& d, const context& ctx, std::string record_key)
    : key(std::move(record_key)), token(lease_token::generate()), token_hex(token.hex()),
      lease_ms(decimal_of(capped(ctx.lease))), ttl_ms(decimal_of(capped(ctx.ttl))),
      claim_px(decimal_of(std::max(capped(ctx.lease), capped(ctx.ttl)) + capped(d.options.retention_grace))),
      fingerprint(ctx.fingerprint ? std::string_view(*ctx.fingerprint) : std::string_view("-")), keys{key},
      args{text_of(token_hex), lease_ms, ttl_ms, fingerprint, claim_px, d.cache ? "1" : "0"} {}

redis_store::impl::complete_request::complete_request(const impl& d, const identity& id, const lease_token& token,
                                                      const payload& value, milliseconds ttl)
    : key(d.key_of(id)), chan(d.channel_for(key)), token_hex(token.hex()), ttl_ms(decimal_of(capped(ttl))),
      encoded(rd::encode_payload(value)), complete_px(decimal_of(std::max(capped(ttl), milliseconds(1)))),
      keys{key}, args{text_of(token_hex), ttl_ms, complete_px, encoded, chan, d.publish} {}

redis_store::impl::release_request::release_request(const impl& d, const identity&, std::string record_key,
                                                    std::string token)
    : key(std::move(record_key)), chan(d.channel_for(key)), token_text(std::move(token)), keys{key},
      args{token_text, chan, d.publish} {}

redis_store::impl::look redis_store::impl::read_look(const context& ctx, const acquire_request& r, outcome& out,
                                                     steady::time_point sent_at) {
  const target t{"try_acquire", &ctx.id};
  const answer a = read_answer(t, *out.reply);
  look result;
  if (a.whole.starts_with("idem/")) {
    result.answer = replay(t, a.whole, r.key, std::nullopt);
  } else if (a.code == "A" || a.code == "T") {
    if (options.replica_ack.replicas > 0) {
      const long long acknowledged = wait_for_replicas(t, r.key);
      if (acknowledged < options.replica_ack.replicas) {
        try {
          release_record(ctx.id, r.key, text_of(r.token_hex));  // best effort: do not block the key for a lease
        } catch (const store_error&) {
        }
        check_durability(t, acknowledged);
      }
    }
    result.answer = acquired{r.token, /*took_over=*/a.code == "T"};
  } else if (a.code.starts_with("D")) {  // "D<remaining ttl> <record>", asked for by the cache
    result.answer = replay(t, a.rest, r.key, saturating_add(sent_at, milliseconds(number(t, a.code.substr(1)))));
  } else if (a.code == "B") {
    const auto [remaining, holder] = split(t, a.rest);
    const milliseconds lease_left(number(t, remaining));
    result.busy = true;
    result.lease_until = saturating_add(sent_at, lease_left);
    result.answer = in_flight{lease_left};
    result.holder = std::string(holder);
  } else if (a.code == "M") {
    result.answer = fingerprint_mismatch{std::string(a.rest), std::string(r.fingerprint)};
  } else {
    refuse(t, a.code, a.rest);
  }
  return result;
}

redis_store::impl::look redis_store::impl::check(const context& ctx, const acquire_request& r) {
  const steady::time_point sent_at = steady::now();
  outcome out = eval({"try_acquire", &ctx.id}, rd::scripts().acquire, r.keys, r.args, false);
  return read_look(ctx, r, out, sent_at);
}

void redis_store::impl::read_complete(const target& t, const complete_request& r, const payload* value,
                                      milliseconds ttl, const outcome& out, steady::time_point sent_at) {
  const answer a = read_answer(t, *out.reply);
  if (a.code == "OK") {
    if (cache && value != nullptr) {
      const auto [completed_at, stored] = split(t, a.rest);
      duplicate done{*value, std::chrono::system_clock::time_point(milliseconds(number(t, completed_at)))};
      remember(r.key, done, stored == "-" ? std::string() : std::string(stored), saturating_add(sent_at, capped(ttl)),
               sent_at);
    }
    check_durability(t, out.acknowledged);
    return;
  }
  if (a.code == "MISSING" || a.code == "DONE" || a.code == "STOLEN") lease_lost(t, a.code);
  refuse(t, a.code, a.rest);
}

void redis_store::impl::read_release(const target& t, const outcome& out) const {
  const answer a = read_answer(t, *out.reply);
  if (a.code == "OK") {
    check_durability(t, out.acknowledged);
    return;
  }
  if (a.code == "MISSING" || a.code == "DONE" || a.code == "STOLEN") lease_lost(t, a.code);
  refuse(t, a.code, a.rest);
}

void redis_store::impl::release_record(const identity& id, const std::string& key, std::string_view token_text) {
  const target t{"release", &id};
  const release_request r(*this, id, key, std::string(token_text));
  read_release(t, eval(t, rd::scripts().release, r.keys, r.args, true));
}

duplicate redis_store::impl::replay(const target& t, std::string_view value, const std::string& key,
                                    std::optional<steady::time_point> expires) {
  auto record = rd::decode_complete(value);
  if (!record) {
    throw corrupt_record_error("redis_store: cannot " + std::string(t.operation) + t.describe() +
                                   ": the complete record is malformed",
                               std::string(t.operation), t.record());
  }
  duplicate d{std::move(record->value), std::chrono::system_clock::time_point(milliseconds(record->completed_at_ms))};
  if (cache && expires) remember(key, d, std::move(record->fingerprint), *expires, steady::now());
  return d;
}

std::optional<acquire_result> redis_store::impl::cached(const context& ctx, const std::string& key,
                                                        steady::time_point now) {
  if (!cache) return std::nullopt;
  auto hit = cache->find(key, now);
  if (!hit) return std::nullopt;
  cache_hits.fetch_add(1, std::memory_order_relaxed);
  if (ctx.fingerprint && !hit->fingerprint.empty() && hit->fingerprint != *ctx.fingerprint) {
    return fingerprint_mismatch{hit->fingerprint, *ctx.fingerprint};
  }
  return duplicate{hit->value, hit->completed_at, /*from_cache=*/true};
}

std::optional<acquire_result> redis_store::impl::from_message(const context& ctx, std::string_view message,
                                                              std::string_view holder) {
  if (holder.empty() || message.size() < holder.size() + 4 || !message.starts_with("c ") ||
      message.substr(2, holder.size()) != holder || message[2 + holder.size()] != ' ') {
    return std::nullopt;
  }
  auto record = rd::decode_complete(message.substr(3 + holder.size()));
  if (!record) return std::nullopt;
  if (ctx.fingerprint && !record->fingerprint.empty() && record->fingerprint != *ctx.fingerprint) {
    return fingerprint_mismatch{std::move(record->fingerprint), *ctx.fingerprint};
  }
  return duplicate{std::move(record->value), std::chrono::system_clock::time_point(milliseconds(record->completed_at_ms))};
}

void redis_store::impl::remember(const std::string& key, const duplicate& d, std::string stored_fingerprint,
                                 steady::time_point record_expiry, steady::time_point now) {
  auto entry = std::make_shared<rd::completed_entry>();
  entry->value = d.value;
  entry->completed_at = d.completed_at;
  entry->fingerprint = std::move(stored_fingerprint);
  entry->expires_at = std::min(record_expiry, saturating_add(now, options.local_cache.max_age));
  cache->put(key, std::move(entry));
}

}  // namespace idem
