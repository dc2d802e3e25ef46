// idem/payload.hpp — what a completed record stores for replay.
//
// A payload is a type tag, opaque bytes and flat string attributes. The engine never interprets
// it; a codec turns a function's result into a payload and back.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace idem {

// idem::payload
//
// `type` names the encoding (never empty; "none" for payload::none()). `body` holds bytes (a
// std::string used as a byte container; it may contain NULs). `attributes` are flat string pairs
// returned verbatim on a duplicate, for correlation data such as ids of messages the first run
// published. Compared by content.
struct payload {
  static constexpr std::string_view none_type = "none";

  std::string type{none_type};
  std::string body;
  std::map<std::string, std::string, std::less<>> attributes;

  // The payload of a function with nothing to replay: type "none", empty body, no attributes.
  static payload none() { return payload{}; }
  bool is_none() const noexcept { return type == none_type && body.empty() && attributes.empty(); }

  friend bool operator==(const payload&, const payload&) = default;
};

}  // namespace idem
