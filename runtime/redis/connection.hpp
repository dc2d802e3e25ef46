// runtime/redis/connection.hpp — one blocking hiredis connection, as an RAII value.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <hiredis/hiredis.h>

namespace idem::detail::redis {

struct reply_deleter {
  void operator()(redisReply* reply) const noexcept {
    if (reply != nullptr) freeReplyObject(reply);
  }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

// The connection failed (refused, reset, timed out, protocol error). The store turns it into
// store_unavailable_error naming the operation and the record; the connection is then unusable.
// `outcome_unknown`: the command had been sent (in part or whole) when the failure came, so Redis
// may run it, even later: closing the connection does not make Redis drop what it has received.
class io_failure : public std::runtime_error {
 public:
  explicit io_failure(const std::string& message, bool outcome_unknown = false)
      : std::runtime_error(message), outcome_unknown_(outcome_unknown) {}
  bool outcome_unknown() const noexcept { return outcome_unknown_; }

 private:
  bool outcome_unknown_;
};

// Where and how to connect.
struct endpoint {
  std::string host;
  int port = 6379;
  std::string username;
  std::string password;
  int database = 0;
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds command_timeout{2000};

  // "host:port", for messages.
  std::string describe() const;
};

// A command as argv: views into bytes the caller keeps alive until the command was sent. Up to
// `inline_arguments` arguments live in the object itself, so a script call (EVALSHA, its sha, the
// key count, a key and six arguments) allocates nothing; a longer command (a purge's page of keys)
// moves to the heap. `command(n)` makes room for n arguments at once.
class command {
 public:
  static constexpr std::size_t inline_arguments = 12;

  command() = default;
  explicit command(std::size_t arguments) { reserve(arguments); }
  void reserve(std::size_t n) {
    if (n <= inline_arguments) return;
    heap_args_.reserve(n);
    heap_lengths_.reserve(n);
  }
  command& arg(std::string_view bytes) {
    if (size_ < inline_arguments && heap_args_.empty()) {
      inline_args_[size_] = bytes.data();
      inline_lengths_[size_] = bytes.size();
    } else {
      if (heap_args_.empty()) {  // the first argument past the inline ones: all of them move
        heap_args_.assign(inline_args_.begin(), inline_args_.end());
        heap_lengths_.assign(inline_lengths_.begin(), inline_lengths_.end());
      }
      heap_args_.push_back(bytes.data());
      heap_lengths_.push_back(bytes.size());
    }
    ++size_;
    return *this;
  }
  // No arguments, as if new; what the heap holds keeps its capacity.
  void clear() noexcept {
    size_ = 0;
    heap_args_.clear();
    heap_lengths_.clear();
  }
  int argc() const noexcept { return static_cast<int>(size_); }
  // Appends the command in the Redis protocol (RESP): `*argc`, then `$length` and the bytes of each
  // argument.
  void append_to(std::string& wire) const;
  const char** argv() noexcept { return heap_args_.empty() ? inline_args_.data() : heap_args_.data(); }
  const char* const* argv() const noexcept { return heap_args_.empty() ? inline_args_.data() : heap_args_.data(); }
  const std::size_t* lengths() const noexcept {
    return heap_lengths_.empty() ? inline_lengths_.data() : heap_lengths_.data();
  }

 private:
  std::size_t size_ = 0;
  std::array<const char*, inline_arguments> inline_args_{};
  std::array<std::size_t, inline_arguments> inline_lengths_{};
  std::vector<const char*> heap_args_;  // every argument once there are more than inline_arguments
  std::vector<std::size_t> heap_lengths_;
};

// idem::detail::redis::connection
//
// A connected, authenticated hiredis context with send and receive timeouts of command_timeout.
// Not thread-safe: one user at a time (a multiplexed_connection or the subscriber thread owns it).
// Once a call threw io_failure the connection is broken and must be discarded.
class connection {
 public:
  // Connects within connect_timeout, then AUTH and SELECT as configured. Throws io_failure.
  explicit connection(const endpoint& where);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Sends `commands` in one write and reads one reply each into `replies` (same size). A reply of
  // type error is returned, not thrown. Throws io_failure.
  void pipeline(std::span<command> commands, std::span<reply_ptr> replies);
  // One command, one reply. Throws io_failure.
  reply_ptr run(command& cmd);

  bool broken() const noexcept { return broken_; }
  int fd() const noexcept;
  redisContext* context() noexcept { return context_.get(); }

 private:
  struct context_deleter {
    void operator()(redisContext* c) const noexcept { redisFree(c); }
  };
  // `outcome_unknown`: the commands may have reached the server (see io_failure).
  [[noreturn]] void fail(std::string_view what, bool outcome_unknown = false);

  std::unique_ptr<redisContext, context_deleter> context_;
  std::chrono::milliseconds command_timeout_;
  bool broken_ = false;
};

// A reply's bytes as a string_view (empty for non-string replies).
inline std::string_view text(const redisReply* reply) noexcept {
  if (reply == nullptr || reply->str == nullptr) return {};
  return std::string_view(reply->str, reply->len);
}

}  // namespace idem::detail::redis
