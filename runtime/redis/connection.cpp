// runtime/redis/connection.cpp — one blocking hiredis connection.
#include "connection.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

#include <sys/time.h>

namespace idem::detail::redis {
namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(d.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((d.count() % 1000) * 1000);
  return tv;
}

// `<type><n>\r\n` at `out`; returns the end.
char* put_header(char* out, char type, std::size_t n) {
  *out++ = type;
  out = std::to_chars(out, out + 20, n).ptr;
  *out++ = '\r';
  *out++ = '\n';
  return out;
}

// The longest header: the type, 20 digits and CRLF.
constexpr std::size_t max_header = 1 + 20 + 2;

}  // namespace

void command::append_to(std::string& wire) const {
  // One resize to an upper bound, headers and bytes written in place, then cut to what was written:
  // a handful of string appends per argument cost more than the bytes they copy.
  const char* const* args = argv();
  const std::size_t* lens = lengths();
  std::size_t bound = max_header;
  for (std::size_t i = 0; i < size_; ++i) bound += max_header + lens[i] + 2;
  const std::size_t start = wire.size();
  wire.resize(start + bound);
  char* out = put_header(wire.data() + start, '*', size_);
  for (std::size_t i = 0; i < size_; ++i) {
    out = put_header(out, '$', lens[i]);
    if (lens[i] != 0) std::memcpy(out, args[i], lens[i]);
    out += lens[i];
    *out++ = '\r';
    *out++ = '\n';
  }
  wire.resize(static_cast<std::size_t>(out - wire.data()));
}

std::string endpoint::describe() const { return host + ":" + std::to_string(port); }

connection::connection(const endpoint& where) : command_timeout_(where.command_timeout) {
  context_.reset(redisConnectWithTimeout(where.host.c_str(), where.port, to_timeval(where.connect_timeout)));
  if (context_ == nullptr) throw io_failure("cannot allocate a hiredis context");
  if (context_->err != 0) {
    std::string reason = context_->errstr;
    context_.reset();
    if (reason.find("timed out") != std::string::npos || reason.find("Resource temporarily") != std::string::npos)
      reason = "connect timed out after " + std::to_string(where.connect_timeout.count()) + " ms";
    throw io_failure("cannot connect to " + where.describe() + ": " + reason);
  }
  redisSetTimeout(context_.get(), to_timeval(where.command_timeout));
  redisEnableKeepAlive(context_.get());

  auto expect_ok = [&](command& cmd, std::string_view what) {
    reply_ptr reply = run(cmd);
    if (reply->type == REDIS_REPLY_ERROR) {
      broken_ = true;
      throw io_failure(std::string(what) + " failed: " + std::string(text(reply.get())));
    }
  };
  if (!where.password.empty()) {
    command auth;
    auth.arg("AUTH");
    if (!where.username.empty()) auth.arg(where.username);
    auth.arg(where.password);
    expect_ok(auth, "AUTH");
  }
  if (where.database != 0) {
    const std::string db = std::to_string(where.database);
    command select;
    select.arg("SELECT").arg(db);
    expect_ok(select, "SELECT " + db);
  }
}

connection::~connection() = default;

void connection::fail(std::string_view what, bool outcome_unknown) {
  broken_ = true;
  std::string reason;
  const bool timed_out = context_->err == REDIS_ERR_IO &&
                         (errno == EAGAIN || errno == EWOULDBLOCK ||
                          std::strstr(context_->errstr, "temporarily unavailable") != nullptr);
  if (timed_out) {
    reason = "no reply within the command timeout of " + std::to_string(command_timeout_.count()) + " ms";
  } else if (context_->err == REDIS_ERR_EOF) {
    reason = "the server closed the connection";
  } else {
    reason = context_->errstr;
  }
  throw io_failure(std::string(what) + ": " + reason, outcome_unknown);
}

void connection::pipeline(std::span<command> commands, std::span<reply_ptr> replies) {
  if (broken_) throw io_failure("connection is broken");
  for (command& cmd : commands) {
    if (redisAppendCommandArgv(context_.get(), cmd.argc(), cmd.argv(), cmd.lengths()) != REDIS_OK) fail("send");
  }
  for (reply_ptr& out : replies) {
    void* raw = nullptr;
    if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr) fail("receive", /*outcome_unknown=*/true);
    out.reset(static_cast<redisReply*>(raw));
  }
}

reply_ptr connection::run(command& cmd) {
  reply_ptr reply;
  pipeline(std::span<command>(&cmd, 1), std::span<reply_ptr>(&reply, 1));
  return reply;
}

int connection::fd() const noexcept { return context_ == nullptr ? -1 : context_->fd; }

}  // namespace idem::detail::redis
