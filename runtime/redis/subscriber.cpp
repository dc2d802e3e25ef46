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

subscriber::subscriber(endpoint where, bool sharded) : where_(std::move(where)), sharded_(sharded) {
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
  ::poll(&fd, 1, pause.count() < 0 ? -1 : static_cast<int>(pause.count()));
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
    if (state_->lost) {  // a new owner of the channel's slot was found: subscribe afresh
      state_->lost = false;
      hub_.dirty_ = true;
    }
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

bool subscriber::watch::notify_on_change(const snapshot& seen, std::function<void()> on_change) {
  std::lock_guard lock(hub_.mutex_);
  const channel_state& ch = *state_;
  if (hub_.stop_ || ch.events != seen.events || ch.confirmed != seen.confirmed || ch.lost != seen.lost ||
      ch.confirmations != seen.confirmations) {
    return false;
  }
  state_->listeners.emplace_back(this, std::move(on_change));
  return true;
}

void subscriber::watch::cancel_notify() {
  std::function<void()> dropped;  // destroyed outside the lock: it may own anything
  std::lock_guard lock(hub_.mutex_);
  auto& listeners = state_->listeners;
  auto it = std::find_if(listeners.begin(), listeners.end(), [this](const auto& l) { return l.first == this; });
  if (it == listeners.end()) return;
  dropped = std::move(it->second);
  listeners.erase(it);
}

subscriber::snapshot subscriber::watch::state() const {
  std::lock_guard lock(hub_.mutex_);
  return snapshot{state_->confirmed, state_->lost, state_->confirmations, state_->events};
}

std::string subscriber::watch::last_message() const {
  std::lock_guard lock(hub_.mutex_);
  return state_->last_message;
}

void subscriber::watch::wait(const snapshot& seen, std::chrono::steady_clock::time_point until) const {
  std::unique_lock lock(hub_.mutex_);
  state_->changed.wait_until(lock, until, [&] {
    return hub_.stop_ || state_->events != seen.events || state_->confirmed != seen.confirmed ||
           state_->lost != seen.lost || state_->confirmations != seen.confirmations;
  });
}

// --- the thread --------------------------------------------------------------------------------

void subscriber::run() noexcept {
  int failures = 0;
  for (;;) {
    bool idle = false;
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      idle = channels_.empty();
    }
    if (idle) {  // nobody waits: no connection (a node that is gone is not retried for nobody)
      sleep_for(std::chrono::milliseconds(-1));
      continue;
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
    connects_.fetch_add(1, std::memory_order_relaxed);
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
    run_due();
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
  std::deque<pending> sent;  // this connection's commands still unanswered
  std::vector<pending> batch;
  const char* const subscribe_command = sharded_ ? "SSUBSCRIBE" : "SUBSCRIBE";
  const char* const unsubscribe_command = sharded_ ? "SUNSUBSCRIBE" : "UNSUBSCRIBE";
  for (;;) {
    batch.clear();
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      if (dirty_) {
        dirty_ = false;
        for (auto it = channels_.begin(); it != channels_.end();) {
          channel_state& ch = *it->second;
          const bool want = ch.waiters > 0 && !ch.lost;
          if (want != ch.sent) {
            batch.push_back({it->first, want});
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
    // One command per channel, all in one write.
    for (const pending& p : batch) {
      command cmd;
      cmd.arg(p.subscribe ? subscribe_command : unsubscribe_command).arg(p.channel);
      if (redisAppendCommandArgv(context, cmd.argc(), cmd.argv(), cmd.lengths()) != REDIS_OK) return;
      sent.push_back(p);
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
        handle(*reply, sent);
      }
      run_due();
    }
  }
}

void subscriber::handle(const redisReply& reply, std::deque<pending>& sent) {
  std::lock_guard lock(mutex_);
  if (reply.type == REDIS_REPLY_ERROR) {
    // The answer to the oldest command still unanswered: the node refused it (MOVED for a
    // channel of a slot it does not serve).
    if (sent.empty()) return;
    const pending refused = std::move(sent.front());
    sent.pop_front();
    answered_locked(refused.channel, refused.subscribe);
    if (refused.subscribe) lose_locked(refused.channel);
    return;
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < 3) return;
  const std::string_view kind = text(reply.element[0]);
  const std::string channel(text(reply.element[1]));
  if (kind == "message" || kind == "smessage") {
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    channel_state& ch = *it->second;
    ch.last_message.assign(text(reply.element[2]));
    ++ch.events;
    messages_.fetch_add(1, std::memory_order_relaxed);
    changed_locked(ch);
    return;
  }
  const bool subscribed = kind == "subscribe" || kind == "ssubscribe";
  if (!subscribed && kind != "unsubscribe" && kind != "sunsubscribe") return;
  // Replies come in the order of the commands; an unsubscribe that answers none of ours is the
  // node dropping the subscription (its slot moved away).
  if (!sent.empty() && sent.front().channel == channel && sent.front().subscribe == subscribed) {
    sent.pop_front();
    answered_locked(channel, subscribed);
  } else if (!subscribed) {
    lose_locked(channel);
  }
}

void subscriber::changed_locked(channel_state& ch) {
  ch.changed.notify_all();
  for (auto& listener : ch.listeners) due_.push_back(std::move(listener.second));
  ch.listeners.clear();
}

void subscriber::run_due() {
  std::vector<std::function<void()>> due;
  {
    std::lock_guard lock(mutex_);
    due.swap(due_);
  }
  for (auto& listener : due) {
    try {
      listener();
    } catch (...) {
      // A listener reports through its own operation.
    }
  }
}

void subscriber::answered_locked(const std::string& channel, bool subscribe) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  channel_state& ch = *it->second;
  if (ch.unanswered > 0) --ch.unanswered;
  if (ch.unanswered == 0 && ch.sent && !ch.confirmed && subscribe) {
    ch.confirmed = true;
    ++ch.confirmations;
    changed_locked(ch);
  }
  if (ch.unanswered == 0 && !ch.sent && ch.waiters == 0) channels_.erase(it);
}

void subscriber::lose_locked(const std::string& channel) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  channel_state& ch = *it->second;
  ch.sent = false;
  ch.confirmed = false;
  ch.lost = true;
  changed_locked(ch);
  if (ch.unanswered == 0 && ch.waiters == 0) channels_.erase(it);
}

void subscriber::disconnected() {
  std::lock_guard lock(mutex_);
  for (auto it = channels_.begin(); it != channels_.end();) {
    channel_state& ch = *it->second;
    ch.sent = false;
    ch.unanswered = 0;
    if (ch.confirmed) {
      ch.confirmed = false;
      changed_locked(ch);
    }
    if (ch.waiters == 0) {
      it = channels_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace idem::detail::redis
