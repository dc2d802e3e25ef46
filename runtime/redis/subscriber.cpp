// runtime/redis/subscriber.cpp — one pub/sub connection per store, shared by all its waiters.
#include "subscriber.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string_view>
#include <vector>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace idem::detail::redis {
namespace {

constexpr std::chrono::milliseconds max_backoff{1000};

}  // namespace

subscriber::subscriber(endpoint where) : where_(std::move(where)) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw io_failure("cannot create the subscriber's eventfd");
}

subscriber::~subscriber() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
  ::close(wake_fd_);
}

void subscriber::wake() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void subscriber::sleep_for(std::chrono::milliseconds pause) noexcept {
  pollfd fd{wake_fd_, POLLIN, 0};
  ::poll(&fd, 1, static_cast<int>(pause.count()));
  std::uint64_t drained = 0;
  [[maybe_unused]] ssize_t n = ::read(wake_fd_, &drained, sizeof drained);
}

// --- watch -------------------------------------------------------------------------------------

subscriber::watch::watch(subscriber& hub, std::string channel) : hub_(hub), channel_(std::move(channel)) {
  bool start = false;
  {
    std::lock_guard lock(hub_.mutex_);
    auto& slot = hub_.channels_[channel_];
    if (slot == nullptr) slot = std::make_shared<channel_state>();
    state_ = slot;
    if (++state_->waiters == 1) hub_.dirty_ = true;
    if (!hub_.thread_.joinable()) {
      hub_.thread_ = std::thread([h = &hub_] { h->run(); });
      start = true;
    }
  }
  if (!start) hub_.wake();
}

subscriber::watch::~watch() {
  bool last = false;
  {
    std::lock_guard lock(hub_.mutex_);
    last = --state_->waiters == 0;
    if (last) hub_.dirty_ = true;
  }
  if (last) hub_.wake();
}

subscriber::snapshot subscriber::watch::state() const {
  std::lock_guard lock(hub_.mutex_);
  return snapshot{state_->confirmed, state_->confirmations, state_->events};
}

std::string subscriber::watch::last_message() const {
  std::lock_guard lock(hub_.mutex_);
  return state_->last_message;
}

void subscriber::watch::wait(const snapshot& seen, std::chrono::steady_clock::time_point until) const {
  std::unique_lock lock(hub_.mutex_);
  state_->changed.wait_until(lock, until, [&] {
    return hub_.stop_ || state_->events != seen.events || state_->confirmed != seen.confirmed ||
           state_->confirmations != seen.confirmations;
  });
}

// --- the thread --------------------------------------------------------------------------------

void subscriber::run() noexcept {
  int failures = 0;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
    }
    std::unique_ptr<connection> conn;
    try {
      conn = std::make_unique<connection>(where_);
    } catch (...) {
      ++failures;
      sleep_for(std::min(max_backoff, std::chrono::milliseconds(10) * (1 << std::min(failures, 7))));
      continue;
    }
    failures = 0;
    {
      std::lock_guard lock(mutex_);
      dirty_ = true;  // (re)subscribe everything that has waiters
    }
    try {
      serve(*conn);
    } catch (...) {
      // The connection failed; fall through to reconnect.
    }
    disconnected();
    conn.reset();
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
    }
    sleep_for(std::chrono::milliseconds(10));  // do not spin against a server that drops us at once
  }
}

void subscriber::serve(connection& conn) {
  redisContext* context = conn.context();
  std::vector<std::string> subscribe;
  std::vector<std::string> unsubscribe;
  for (;;) {
    subscribe.clear();
    unsubscribe.clear();
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      if (dirty_) {
        dirty_ = false;
        for (auto it = channels_.begin(); it != channels_.end();) {
          channel_state& ch = *it->second;
          const bool want = ch.waiters > 0;
          if (want != ch.sent) {
            (want ? subscribe : unsubscribe).push_back(it->first);
            ch.sent = want;
            ++ch.unanswered;
            ch.confirmed = false;
          }
          if (ch.waiters == 0 && !ch.sent && ch.unanswered == 0) {
            it = channels_.erase(it);
          } else {
            ++it;
          }
        }
      }
    }
    for (auto* names : {&subscribe, &unsubscribe}) {
      if (names->empty()) continue;
      command cmd;
      cmd.reserve(names->size() + 1);
      cmd.arg(names == &subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE");
      for (const std::string& name : *names) cmd.arg(name);
      if (redisAppendCommandArgv(context, cmd.argc(), cmd.argv(), cmd.lengths()) != REDIS_OK) return;
    }
    int done = 0;
    while (!done) {
      if (redisBufferWrite(context, &done) != REDIS_OK) return;
    }

    pollfd fds[2] = {{context->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int ready = ::poll(fds, 2, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) {
      std::uint64_t drained = 0;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &drained, sizeof drained);
    }
    if ((fds[0].revents & (POLLIN | POLLERR | POLLHUP)) != 0) {
      if (redisBufferRead(context) != REDIS_OK) return;
      for (;;) {
        void* raw = nullptr;
        if (redisGetReplyFromReader(context, &raw) != REDIS_OK) return;
        if (raw == nullptr) break;
        reply_ptr reply(static_cast<redisReply*>(raw));
        handle(*reply);
      }
    }
  }
}

void subscriber::handle(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < 3) return;
  const std::string_view kind = text(reply.element[0]);
  const std::string channel(text(reply.element[1]));
  std::lock_guard lock(mutex_);
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  channel_state& ch = *it->second;
  if (kind == "message") {
    ch.last_message.assign(text(reply.element[2]));
    ++ch.events;
    messages_.fetch_add(1, std::memory_order_relaxed);
    ch.changed.notify_all();
  } else if (kind == "subscribe" || kind == "unsubscribe") {
    if (ch.unanswered > 0) --ch.unanswered;
    if (ch.unanswered == 0 && ch.sent && !ch.confirmed) {
      ch.confirmed = true;
      ++ch.confirmations;
      ch.changed.notify_all();
    }
    if (ch.unanswered == 0 && !ch.sent && ch.waiters == 0) channels_.erase(it);
  }
}

void subscriber::disconnected() {
  std::lock_guard lock(mutex_);
  for (auto it = channels_.begin(); it != channels_.end();) {
    channel_state& ch = *it->second;
    ch.sent = false;
    ch.unanswered = 0;
    if (ch.confirmed) {
      ch.confirmed = false;
      ch.changed.notify_all();
    }
    if (ch.waiters == 0) {
      it = channels_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace idem::detail::redis
