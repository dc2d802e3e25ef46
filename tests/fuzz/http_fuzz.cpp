// libFuzzer target for the HTTP layer's parsers of untrusted bytes. The first byte picks one:
//   even: an Idempotency-Key header value (idem::http::parse_key). An accepted key is 1..255
//         bytes of printable ASCII and reads back the same from its sf-string spelling (and from
//         its bare spelling when it has no quote or backslash); a refusal gives a reason that
//         never quotes the value.
//   odd:  the body of a stored "http/response" payload (idem::http::decode_response), as a
//         damaged or hostile store returns it. It decodes or throws corrupt_record_error; what
//         decodes re-encodes to exactly the same bytes (one spelling per response).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <idem/errors.hpp>
#include <idem/http/endpoint.hpp>
#include <idem/http/response.hpp>

namespace {

std::string quoted(std::string_view key) {
  std::string out = "\"";
  for (char c : key) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

void check_key(std::string_view value) {
  const idem::http::key_parse_result parsed = idem::http::parse_key(value);
  if (!parsed.ok()) {
    if (!parsed.key.empty()) std::abort();
    // Keys are client data: the reason is one of a few fixed sentences (the length rule names the
    // length only), never anything taken from the value.
    static const std::string_view fixed[] = {
        "the key is empty",
        "idempotency key must not be empty",  // an empty sf-string: ""
        "the key is not a valid sf-string (only \\\" and \\\\ may be escaped)",
        "the key is not a valid sf-string (printable ASCII only)",
        "the key is not a valid sf-string (no closing quote)",
        "the key is not a valid sf-string (characters after the closing quote)",
        "the key is neither an sf-string nor a bare printable ASCII value without spaces, quotes or backslashes",
    };
    bool known = false;
    for (std::string_view reason : fixed) known = known || parsed.problem == reason;
    constexpr std::string_view too_long = "idempotency key must not exceed 255 bytes, got ";
    if (!known && parsed.problem.rfind(too_long, 0) == 0)
      known = parsed.problem.find_first_not_of("0123456789", too_long.size()) == std::string::npos;
    if (!known) {
      std::fprintf(stderr, "http_fuzz: unexpected reason: %s\n", parsed.problem.c_str());
      std::abort();
    }
    return;
  }
  const std::string& key = parsed.key;
  if (key.empty() || key.size() > 255) std::abort();
  for (char c : key)
    if (c < 0x20 || c > 0x7e) std::abort();
  const auto again = idem::http::parse_key(quoted(key));
  if (!again.ok() || again.key != key) std::abort();
  if (key.find_first_of("\"\\ ") == std::string::npos) {
    const auto bare = idem::http::parse_key(key);
    if (!bare.ok() || bare.key != key) std::abort();
  }
}

void check_response(std::string_view bytes) {
  idem::payload p;
  p.type = std::string(idem::http::response_payload_type);
  p.body = std::string(bytes);
  idem::http::response r;
  try {
    r = idem::http::decode_response(p);
  } catch (const idem::corrupt_record_error&) {
    return;
  }
  if (r.status < 100 || r.status > 599) std::abort();
  for (const auto& h : r.headers) {
    if (!idem::http::is_token(h.name)) std::abort();
    if (h.value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) std::abort();
  }
  const idem::payload again = idem::http::encode_response(r);
  if (again != p) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0)
    check_key(rest);
  else
    check_response(rest);
  return 0;
}
