// runtime/postgres/notification_listener.cpp — one LISTEN connection per store.
#include "notification_listener.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include <idem/deadline.hpp>

namespace idem::detail::pg {

struct notification_listener::subscription::slot {
  std::condition_variable changed;
  std::uint64_t generation = 0;  // notifications received for this record
  std::size_t waiters = 0;
  std::vector<subscription*> registered;  // those with a notify_on_change() pending
};

notification_listener::subscription::subscription(notification_listener& owner, std::string key, slot& s,
                                                  std::uint64_t generation, std::uint64_t epoch) noexcept
    : owner_(owner), key_(std::move(key)), slot_(s), seen_generation_(generation), seen_epoch_(epoch) {}

notification_listener::subscription::~subscription() {
  cancel_notify();
  std::lock_guard lock{owner_.mutex_};
  if (--slot_.waiters == 0) owner_.slots_.erase(key_);
}

bool notification_listener::subscription::notify_on_change(std::function<void()> on_change) {
  std::lock_guard lock{owner_.mutex_};
  if (slot_.generation != seen_generation_ || owner_.epoch_ != seen_epoch_ || owner_.stopping_) {
    seen_generation_ = slot_.generation;
    seen_epoch_ = owner_.epoch_;
    return false;
  }
  on_change_ = std::move(on_change);
  slot_.registered.push_back(this);
  return true;
}

void notification_listener::subscription::cancel_notify() {
  std::function<void()> dropped;  // destroyed outside the lock: it may own anything
  std::lock_guard lock{owner_.mutex_};
  auto& r = slot_.registered;
  const auto it = std::find(r.begin(), r.end(), this);
  if (it == r.end()) return;
  r.erase(it);
  dropped = std::move(on_change_);
}

std::vector<std::function<void()>> notification_listener::take_registrations_locked(subscription::slot* only) {
  std::vector<std::function<void()>> due;
  auto take = [&](subscription::slot& s) {
    for (subscription* sub : s.registered) {
      sub->seen_generation_ = s.generation;
      sub->seen_epoch_ = epoch_;
      due.push_back(std::move(sub->on_change_));
      sub->on_change_ = nullptr;
    }
    s.registered.clear();
  };
  if (only != nullptr) {
    take(*only);
  } else {
    for (auto& [key, s] : slots_) take(*s);
  }
  return due;
}

namespace {

void run_all(std::vector<std::function<void()>>& due) {
  for (auto& f : due) {
    try {
      f();
    } catch (...) {
      // Each reports through its own operation.
    }
  }
  due.clear();
}

}  // namespace

bool notification_listener::subscription::wait_until(steady::time_point until) {
  std::unique_lock lock{owner_.mutex_};
  const bool woken = slot_.changed.wait_until(lock, until, [&] {
    return slot_.generation != seen_generation_ || owner_.epoch_ != seen_epoch_ || owner_.stopping_;
  });
  seen_generation_ = slot_.generation;
  seen_epoch_ = owner_.epoch_;
  return woken;
}

notification_listener::notification_listener(connect_params params, std::string channel,
                                             std::chrono::milliseconds connect_timeout, log_sink log,
                                             std::atomic<std::uint64_t>* connects)
    : params_(std::move(params)),
      channel_(std::move(channel)),
      connect_timeout_(connect_timeout),
      log_(std::move(log)),
      connects_(connects) {
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::system_error(errno, std::generic_category(), "postgres_store: cannot create the listener's pipe");
  thread_ = std::thread([this] { run(); });
}

notification_listener::~notification_listener() {
  std::vector<std::function<void()>> due;
  {
    std::lock_guard lock{mutex_};
    stopping_ = true;
    for (auto& [key, s] : slots_) s->changed.notify_all();
    due = take_registrations_locked(nullptr);
  }
  run_all(due);
  stop_requested_.notify_all();
  const char byte = 1;
  [[maybe_unused]] const auto written = ::write(wake_pipe_[1], &byte, 1);
  thread_.join();
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

std::unique_ptr<notification_listener::subscription> notification_listener::subscribe(const std::string& key) {
  std::lock_guard lock{mutex_};
  auto& entry = slots_[key];
  if (!entry) entry = std::make_unique<subscription::slot>();
  ++entry->waiters;
  return std::unique_ptr<subscription>(new subscription(*this, key, *entry, entry->generation, epoch_));
}

void notification_listener::dispatch(const std::string& key) {
  std::vector<std::function<void()>> due;
  {
    std::lock_guard lock{mutex_};
    const auto it = slots_.find(key);
    if (it == slots_.end()) return;
    ++it->second->generation;
    it->second->changed.notify_all();
    due = take_registrations_locked(it->second.get());
  }
  run_all(due);
}

void notification_listener::set_state(bool healthy, int pid) {
  healthy_.store(healthy, std::memory_order_release);
  backend_pid_.store(pid, std::memory_order_release);
  std::vector<std::function<void()>> due;
  {
    std::lock_guard lock{mutex_};
    ++epoch_;
    for (auto& [key, s] : slots_) s->changed.notify_all();
    due = take_registrations_locked(nullptr);
  }
  run_all(due);
}

bool notification_listener::sleep_unless_stopped(std::chrono::milliseconds delay) {
  std::unique_lock lock{mutex_};
  return !stop_requested_.wait_for(lock, delay, [&] { return stopping_; });
}

void notification_listener::run() {
  using namespace std::chrono_literals;
  std::chrono::milliseconds backoff = 10ms;
  bool reported_outage = false;
  for (;;) {
    {
      std::lock_guard lock{mutex_};
      if (stopping_) return;
    }
    connection_ptr conn;
    try {
      conn = params_.connect(deadline_after(connect_timeout_), wake_pipe_[0]);
      exec_simple(conn.get(), fmt::format("LISTEN {}", channel_).c_str(), deadline_after(connect_timeout_));
    } catch (const pg_error& e) {
      {
        std::lock_guard lock{mutex_};
        if (stopping_) return;
      }
      if (!reported_outage && log_) {
        log_({log_level::warning,
              fmt::format("postgres_store: the LISTEN connection cannot connect ({}); waiters re-check "
                          "periodically until it is back",
                          e.what())});
        reported_outage = true;
      }
      if (!sleep_unless_stopped(backoff)) return;
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, 1s);
      continue;
    }
    if (connects_ != nullptr) connects_->fetch_add(1, std::memory_order_relaxed);
    if (reported_outage && log_) log_({log_level::info, "postgres_store: the LISTEN connection is back"});
    reported_outage = false;
    backoff = 10ms;
    set_state(true, PQbackendPID(conn.get()));
    serve(conn.get());
    set_state(false, 0);
    {
      std::lock_guard lock{mutex_};
      if (stopping_) return;
    }
    if (log_) {
      log_({log_level::warning,
            "postgres_store: the LISTEN connection dropped; reconnecting, and waiters re-check periodically "
            "until it is back"});
      reported_outage = true;
    }
  }
}

// Reads notifications until the connection breaks or the listener stops.
void notification_listener::serve(PGconn* conn) {
  for (;;) {
    pollfd fds[2] = {{PQsocket(conn), POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;  // shutting down
    if (fds[0].revents == 0) continue;
    if (PQconsumeInput(conn) == 0 || PQstatus(conn) != CONNECTION_OK) return;
    while (PGnotify* note = PQnotifies(conn)) {
      std::string key = note->extra != nullptr ? note->extra : "";
      PQfreemem(note);
      dispatch(key);
    }
    // Anything else (an error while idle, the end of the stream) shows up as a bad status.
    if (PQstatus(conn) != CONNECTION_OK) return;
  }
}

}  // namespace idem::detail::pg
