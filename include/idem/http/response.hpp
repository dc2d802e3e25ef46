// idem/http/response.hpp — an HTTP response as idem stores and replays it, and its codec.
//
// Independent of any server library: adapters convert their own response type to and from
// idem::http::response.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <idem/payload.hpp>

namespace idem::http {

// One header line. Names keep the case the handler used; comparisons are case-insensitive.
struct header {
  std::string name;
  std::string value;
  friend bool operator==(const header&, const header&) = default;
};

// idem::http::response
//
// Status, headers in order (a name may repeat: multi-values stay separate lines, in order) and
// the body bytes (may contain NULs). A value type, compared by content.
struct response {
  int status = 200;
  std::vector<header> headers;
  std::string body;

  // The first value of header `name` (case-insensitive), or nullptr.
  const std::string* find(std::string_view name) const noexcept;

  friend bool operator==(const response&, const response&) = default;
};

// The payload type of a stored response.
inline constexpr std::string_view response_payload_type = "http/response";

// Encodes `r` as a payload of type "http/response": a compact length-prefixed binary form of
// status, headers (order and repeats kept) and body. Throws std::invalid_argument for a status
// outside 100..599 or a header that could not be written back safely (a name that is not a
// token, a value with CR, LF or NUL).
[[nodiscard]] payload encode_response(const response& r);

// Decodes a payload written by encode_response. Any other type, a truncated or overlong
// encoding, a bad status or an unsafe header throws corrupt_record_error with a short reason;
// hostile bytes never crash and never allocate more than the payload's own size.
[[nodiscard]] response decode_response(const payload& p);

// True if `name` is an RFC 9110 token (1*tchar).
[[nodiscard]] bool is_token(std::string_view name) noexcept;

// Case-insensitive ASCII equality of header names.
[[nodiscard]] bool same_name(std::string_view a, std::string_view b) noexcept;

}  // namespace idem::http
