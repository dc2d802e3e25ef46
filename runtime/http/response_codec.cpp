// The "http/response" payload: version byte 1, status (u16), header count (u32), per header
// name length (u32) + name + value length (u32) + value, body length (u32) + body. Integers
// big-endian. Nothing follows the body.
#include <idem/errors.hpp>
#include <idem/http/response.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>

namespace idem::http {
namespace {

constexpr unsigned char format_version = 1;

bool is_tchar(unsigned char c) noexcept {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

// A value we can write back on a header line: no CR, LF or NUL.
bool is_safe_value(std::string_view value) noexcept {
  for (char c : value)
    if (c == '\r' || c == '\n' || c == '\0') return false;
  return true;
}

void put_u32(std::string& out, std::size_t n) {
  if (n > std::numeric_limits<std::uint32_t>::max()) throw std::invalid_argument("http/response: a part exceeds 4 GiB");
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
}

void put_bytes(std::string& out, std::string_view bytes) {
  put_u32(out, bytes.size());
  out.append(bytes);
}

class reader {
 public:
  explicit reader(std::string_view bytes) : rest_(bytes) {}

  std::uint32_t u(int width, const char* what) {
    if (rest_.size() < static_cast<std::size_t>(width)) fail(std::string("truncated at the ") + what);
    std::uint32_t n = 0;
    for (int i = 0; i < width; ++i) n = (n << 8) | static_cast<unsigned char>(rest_[static_cast<std::size_t>(i)]);
    rest_.remove_prefix(static_cast<std::size_t>(width));
    return n;
  }

  std::string_view bytes(const char* what) {
    const std::uint32_t n = u(4, what);
    if (rest_.size() < n) fail(std::string("the length of the ") + what + " exceeds the record");
    std::string_view out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return out;
  }

  std::size_t left() const noexcept { return rest_.size(); }

  [[noreturn]] static void fail(const std::string& why) {
    throw corrupt_record_error("stored http/response is damaged: " + why);
  }

 private:
  std::string_view rest_;
};

}  // namespace

bool is_token(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (char c : name)
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  return true;
}

bool same_name(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

const std::string* response::find(std::string_view name) const noexcept {
  for (const auto& h : headers)
    if (same_name(h.name, name)) return &h.value;
  return nullptr;
}

payload encode_response(const response& r) {
  if (r.status < 100 || r.status > 599)
    throw std::invalid_argument("http/response: status " + std::to_string(r.status) + " is outside 100..599");
  std::size_t size = 1 + 2 + 4 + 4 + r.body.size();
  for (const auto& h : r.headers) {
    if (!is_token(h.name)) throw std::invalid_argument("http/response: a header name is not a token");
    if (!is_safe_value(h.value))
      throw std::invalid_argument("http/response: the value of " + h.name + " contains CR, LF or NUL");
    size += 8 + h.name.size() + h.value.size();
  }
  payload p;
  p.type = std::string(response_payload_type);
  p.body.reserve(size);
  p.body.push_back(static_cast<char>(format_version));
  p.body.push_back(static_cast<char>((r.status >> 8) & 0xff));
  p.body.push_back(static_cast<char>(r.status & 0xff));
  put_u32(p.body, r.headers.size());
  for (const auto& h : r.headers) {
    put_bytes(p.body, h.name);
    put_bytes(p.body, h.value);
  }
  put_bytes(p.body, r.body);
  return p;
}

response decode_response(const payload& p) {
  if (p.type != response_payload_type)
    throw corrupt_record_error("stored record is not an http/response (its type has " + std::to_string(p.type.size()) +
                               " characters)");
  reader in(p.body);
  const std::uint32_t version = in.u(1, "version");
  if (version != format_version)
    reader::fail("format version " + std::to_string(version) + " is not " + std::to_string(format_version));
  response r;
  r.status = static_cast<int>(in.u(2, "status"));
  if (r.status < 100 || r.status > 599) reader::fail("status " + std::to_string(r.status) + " is outside 100..599");
  const std::uint32_t count = in.u(4, "header count");
  if (count > in.left() / 8) reader::fail("the header count exceeds the record");
  r.headers.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string_view name = in.bytes("header name");
    const std::string_view value = in.bytes("header value");
    if (!is_token(name)) reader::fail("header " + std::to_string(i) + " has a name that is not a token");
    if (!is_safe_value(value)) reader::fail("header " + std::to_string(i) + " has CR, LF or NUL in its value");
    r.headers.push_back({std::string(name), std::string(value)});
  }
  r.body = std::string(in.bytes("body"));
  if (in.left() != 0) reader::fail(std::to_string(in.left()) + " bytes follow the body");
  return r;
}

}  // namespace idem::http
