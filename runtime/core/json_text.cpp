// runtime/core/json_text.cpp — json_codec's text: simdjson parses the stored text into the
// nlohmann::json value a type's from_json expects, and nlohmann's serializer, kept per thread,
// writes a value's text.
//
// Why not nlohmann::json::parse: its lexer spends ~100 instructions per character (it keeps every
// token's text for error messages), so decoding a replay's 52-byte receipt cost ~9,000
// instructions; simdjson's parse and the conversion together cost ~4,400 (docs/benchmarks.md,
// "`json_codec` reads with simdjson"; bench/codec/json_codec_bench.cpp).
// Why not nlohmann::json::dump: each call builds a serializer (a 512-byte indent string, a shared
// output adapter, a locale query) and grows its result by doubling; the kept one writes into a
// buffer that stays allocated, and the result is one exact copy of it.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <idem/errors.hpp>
#include <idem/json_codec.hpp>

namespace idem::detail {

namespace {

// Documents up to this size reuse their thread's parser and buffers; a larger one gets its own, so a
// single large result does not keep its size allocated for the rest of the thread's life (a parser
// holds about 14 bytes per byte of its largest document: ~230 KB per thread at most here).
constexpr std::size_t reused_capacity = 16 * 1024;

// The nlohmann value of a simdjson element, with the choices nlohmann's own parser makes: a
// non-negative integer is unsigned, a negative one signed; of repeated names the last one counts.
// (One difference: `-0`, which nlohmann never writes, becomes an unsigned zero, not a signed one.)
// Recursion is bounded by the parser's maximum depth (json_codec::max_depth levels).
nlohmann::json to_nlohmann(simdjson::dom::element element) {
  using kind = simdjson::dom::element_type;
  switch (element.type()) {
    case kind::OBJECT: {
      nlohmann::json value(nlohmann::json::value_t::object);
      auto& members = value.get_ref<nlohmann::json::object_t&>();
      for (const simdjson::dom::key_value_pair member : simdjson::dom::object(element)) {
        // nlohmann writes names in order, so a name normally comes after every name before it: put
        // at the end in one comparison (insert_or_assign with a hint looks the place up twice).
        if (members.empty() || members.rbegin()->first < member.key) {
          members.emplace_hint(members.end(), std::piecewise_construct, std::forward_as_tuple(member.key),
                               std::forward_as_tuple(to_nlohmann(member.value)));
        } else {
          members.insert_or_assign(std::string(member.key), to_nlohmann(member.value));
        }
      }
      return value;
    }
    case kind::ARRAY: {
      nlohmann::json value(nlohmann::json::value_t::array);
      auto& items = value.get_ref<nlohmann::json::array_t&>();
      for (const simdjson::dom::element item : simdjson::dom::array(element)) items.push_back(to_nlohmann(item));
      return value;
    }
    case kind::STRING:
      return std::string(std::string_view(element));
    case kind::INT64: {
      const std::int64_t number = std::int64_t(element);
      if (number >= 0) return static_cast<std::uint64_t>(number);
      return number;
    }
    case kind::UINT64:
      return std::uint64_t(element);
    case kind::DOUBLE:
      return double(element);
    case kind::BOOL:
      return bool(element);
    case kind::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
}

// A parser for `capacity` bytes that refuses nesting deeper than json_codec::max_depth, the limit
// json_codec documents, whatever simdjson's own default is.
simdjson::dom::parser limited_parser(std::size_t capacity) {
  simdjson::dom::parser parser;
  if (parser.allocate(capacity, json_codec::max_depth) != simdjson::SUCCESS) throw std::bad_alloc();
  return parser;
}

nlohmann::json parse_padded(simdjson::dom::parser& parser, std::string& padded, std::string_view text) {
  // simdjson reads up to SIMDJSON_PADDING bytes past the end of the text: the copy provides them.
  padded.assign(text);
  padded.resize(text.size() + simdjson::SIMDJSON_PADDING);
  simdjson::dom::element root;
  if (const auto error = parser.parse(padded.data(), text.size(), false).get(root); error != simdjson::SUCCESS)
    throw corrupt_record_error(std::string("json_codec could not decode the stored payload: ") +
                               simdjson::error_message(error));
  return to_nlohmann(root);
}

// dismantle() down to `levels` more levels; what lies deeper is left to nlohmann's destructor.
void dismantle_levels(nlohmann::json& value, std::size_t levels) noexcept {
  if (levels == 0) return;
  if (value.is_object()) {
    auto& members = value.get_ref<nlohmann::json::object_t&>();
    for (auto& member : members) dismantle_levels(member.second, levels - 1);
    members.clear();
  } else if (value.is_array()) {
    auto& items = value.get_ref<nlohmann::json::array_t&>();
    for (auto& item : items) dismantle_levels(item, levels - 1);
    items.clear();
  }
}

}  // namespace

void dismantle(nlohmann::json& value) noexcept { dismantle_levels(value, json_codec::max_depth); }

nlohmann::json parse_stored_json(std::string_view text) {
  if (text.size() > reused_capacity) {
    simdjson::dom::parser parser = limited_parser(text.size());
    std::string padded;
    return parse_padded(parser, padded, text);
  }
  thread_local simdjson::dom::parser parser = limited_parser(reused_capacity);
  thread_local std::string padded;
  return parse_padded(parser, padded, text);
}

std::string dump_json(const nlohmann::json& value) {
  struct kept_serializer {
    std::string text;
    nlohmann::detail::serializer<nlohmann::json> writer{
        std::make_shared<nlohmann::detail::output_string_adapter<char, std::string>>(text), ' '};
  };
  thread_local kept_serializer kept;
  kept.text.clear();  // a dump that threw left part of its text
  kept.writer.dump(value, false, false, 0);
  // A buffer grown past reused_capacity is handed over with its text: the thread keeps no large
  // buffer (the writer still refers to `text`, now empty, and grows it again from nothing).
  if (kept.text.capacity() > reused_capacity) return std::move(kept.text);
  return std::string(kept.text);
}

}  // namespace idem::detail
