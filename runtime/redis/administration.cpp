// runtime/redis/administration.cpp — redis_store's administration: inspect and release are one
// script on the record's node; list and count scan every master and read each record's header.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "store_impl.hpp"

namespace idem {

namespace {

using std::chrono::system_clock;

// A listing reads this much of each value: the longest header, and enough of the payload for its
// type and the length of its body.
const std::string listing_bytes = std::to_string(rd::max_header_length + 512);

system_clock::time_point at_ms(std::int64_t ms) { return system_clock::time_point(std::chrono::milliseconds(ms)); }

// Splits `text` at spaces into exactly `n` fields.
std::optional<std::vector<std::string_view>> fields(std::string_view text, std::size_t n) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < n) {
    const std::size_t space = text.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    out.push_back(text.substr(0, space));
    text = text.substr(space + 1);
  }
  out.push_back(text);
  return out;
}

// `<len>:` at the front of `text`: the length, and `text` moved past the colon.
std::optional<std::size_t> length_prefix(std::string_view& text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 19) return std::nullopt;
  const auto n = rd::parse_int(text.substr(0, colon));
  if (!n || *n < 0) return std::nullopt;
  text = text.substr(colon + 1);
  return static_cast<std::size_t>(*n);
}

}  // namespace

std::optional<record_summary> redis_store::impl::read_summary(const target& t, const std::string& key,
                                                              std::string_view bytes) {
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 1> args{bytes};
  const outcome out = eval(t, rd::scripts().admin_read, keys, args, false);
  const answer a = read_answer(t, *out.reply);
  if (a.code == "N") return std::nullopt;
  if (a.code != "R") refuse(t, a.code, a.rest);
  const std::size_t newline = a.rest.find('\n');
  if (newline == std::string_view::npos) unexpected(t);
  const std::int64_t now = number(t, a.rest.substr(0, newline));
  const std::string_view value = a.rest.substr(newline + 1);

  const auto who = identity_of(key);
  if (!who) refuse(t, "F", "");
  record_summary r;
  r.scope = who->first;
  r.key_digest = who->second;
  r.read_at = at_ms(now);
  const std::string name = r.to_string();
  auto corrupt = [&](std::string_view why) {
    return corrupt_record_error("redis_store: cannot read " + name + ": " + std::string(why),
                                std::string(t.operation), name);
  };
  const std::size_t header_end = value.find('\n');
  if (!value.starts_with("idem/2 ") || header_end == std::string_view::npos) throw corrupt("its header is malformed");
  const std::string_view header = value.substr(7, header_end - 7);
  auto time = [&](std::string_view field, std::int64_t plus = 0) {
    const auto n = rd::parse_int(field);
    if (!n || *n < 0 || *n > rd::max_time_point_ms - plus) throw corrupt("a time is out of range");
    return *n + plus;
  };
  auto duration = [&](std::string_view field) {
    const auto n = rd::parse_int(field);
    if (!n || *n < 0 || *n > rd::max_time_point_ms) throw corrupt("a duration is out of range");
    return *n;
  };
  if (header.starts_with("p ")) {
    // p <claimed at> <lease from> <lease ms> <ttl ms> <fingerprint> <token>
    const auto f = fields(header.substr(2), 6);
    if (!f) throw corrupt("its header is malformed");
    r.state = record_state::in_progress;
    r.created_at = at_ms(time((*f)[0]));
    r.lease_expires_at = at_ms(time((*f)[1], duration((*f)[2])));
    r.expires_at = at_ms(time((*f)[0], duration((*f)[3])));
    r.has_fingerprint = (*f)[4] != "-";
  } else if (header.starts_with("c ")) {
    // c <completed at> <ttl ms> <fingerprint>, then the payload
    const auto f = fields(header.substr(2), 3);
    if (!f) throw corrupt("its header is malformed");
    r.state = record_state::completed;
    r.created_at = at_ms(time((*f)[0]));
    r.completed_at = r.created_at;
    r.expires_at = at_ms(time((*f)[0], duration((*f)[1])));
    r.has_fingerprint = (*f)[2] != "-";
    if (bytes == "0") {
      auto whole = rd::decode_complete(value);
      if (!whole) throw corrupt("its payload is malformed");
      r.payload_type = whole->value.type;
      r.payload_size = whole->value.body.size();
      r.value = std::move(whole->value);
    } else {
      // <len>:<type><len>:<body>...: the type and the body's length, from the bytes read.
      std::string_view rest = value.substr(header_end + 1);
      const auto type_length = length_prefix(rest);
      if (type_length && *type_length <= rest.size()) {
        r.payload_type = std::string(rest.substr(0, *type_length));
        rest = rest.substr(*type_length);
        if (const auto body_length = length_prefix(rest)) r.payload_size = *body_length;
      }
    }
  } else {
    throw corrupt("its state is unknown");
  }
  return r;
}

void redis_store::impl::for_each_record_key(const target& t, const std::function<void(const std::string&)>& visit) {
  std::vector<rd::node*> masters;
  try {
    masters = topo.masters();
  } catch (const rd::io_failure& e) {
    unavailable(t, nullptr, e);
  }
  const rd::decimal count(1000);
  for (rd::node* node : masters) {
    std::string cursor = "0";
    do {
      std::vector<std::string> keys;
      try {
        auto conn = node->pool.take();
        rd::command scan;
        scan.arg("SCAN").arg(cursor).arg("MATCH").arg(scan_pattern).arg("COUNT").arg(count.view());
        rd::reply_ptr reply = conn->run(scan);
        round_trips.fetch_add(1, std::memory_order_relaxed);
        if (reply->type == REDIS_REPLY_ERROR) unavailable(t, node, "SCAN failed: " + std::string(rd::text(reply.get())));
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 || reply->element[1]->type != REDIS_REPLY_ARRAY)
          unavailable(t, node, "SCAN answered something other than a cursor and a page");
        cursor = std::string(rd::text(reply->element[0]));
        for (std::size_t i = 0; i < reply->element[1]->elements; ++i)
          keys.emplace_back(rd::text(reply->element[1]->element[i]));
      } catch (const rd::io_failure& e) {
        unavailable(t, node, e);
      }
      for (const std::string& key : keys) visit(key);
    } while (cursor != "0");
  }
}

std::optional<record_summary> redis_store::inspect_record(const identity& id, bool with_payload) {
  impl& d = *impl_;
  const impl::target t{"inspect", &id};
  return d.read_summary(t, d.key_of(id), with_payload ? std::string_view("0") : std::string_view(listing_bytes));
}

std::vector<record_summary> redis_store::list_records(const record_query& query) {
  query.validate();
  impl& d = *impl_;
  const impl::target t{"list records", nullptr};
  std::vector<record_summary> records;
  d.for_each_record_key(t, [&](const std::string& key) {
    const auto who = d.identity_of(key);
    if (!who || (query.scope && who->first != *query.scope)) return;
    std::optional<record_summary> r = d.read_summary(t, key, listing_bytes);
    if (!r || (query.state && r->state != *query.state) || r->created_at > r->read_at - query.older_than) return;
    records.push_back(std::move(*r));
  });
  std::sort(records.begin(), records.end(), [](const record_summary& a, const record_summary& b) {
    return std::tie(a.created_at, a.scope, a.key_digest) < std::tie(b.created_at, b.scope, b.key_digest);
  });
  if (records.size() > query.limit) records.resize(query.limit);
  return records;
}

admin_release redis_store::release_record(const identity& id, bool end_live_lease) {
  impl& d = *impl_;
  const impl::target t{"release", &id};
  const std::string key = d.key_of(id);
  const std::string channel = d.channel_for(key);
  const std::array<std::string_view, 1> keys{key};
  const std::array<std::string_view, 3> args{end_live_lease ? "1" : "0", channel, d.publish};
  const impl::outcome out = d.eval(t, rd::scripts().admin_release, keys, args, true);
  const impl::answer a = impl::read_answer(t, *out.reply);
  if (a.code == "OK") {
    d.check_durability(t, out.acknowledged);
    return admin_release::released;
  }
  if (a.code == "MISSING") return admin_release::not_found;
  if (a.code == "DONE") return admin_release::completed;
  if (a.code == "LIVE") return admin_release::lease_live;
  d.refuse(t, a.code, a.rest);
}

record_counts redis_store::count_records() {
  impl& d = *impl_;
  const impl::target t{"count records", nullptr};
  record_counts counts;
  d.for_each_record_key(t, [&](const std::string& key) {
    if (!d.identity_of(key)) return;
    if (const std::optional<record_summary> r = d.read_summary(t, key, listing_bytes)) counts.add(*r);
  });
  return counts;
}

}  // namespace idem
