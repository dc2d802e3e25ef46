// runtime/core/reactor.cpp — the one thread on which a store's asynchronous calls progress.
#include "reactor.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <system_error>
#include <vector>

#include <idem/deadline.hpp>

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace idem::detail {
namespace {

constexpr std::uint64_t wake_token = 0;  // the eventfd's epoll data; registrations start at 1

// How late a descriptor's deadline (a command timeout) may be noticed. While descriptors are
// watched the thread wakes at least this often, so arming one never has to wake it: on a busy
// store that write to the eventfd (and the wake-up) would come with every round trip.
constexpr std::chrono::milliseconds descriptor_slack{50};
// How long the thread keeps waking every descriptor_slack after the last descriptor it watched:
// a store in use arms one at every round trip, and each would otherwise find the thread asleep
// with no timeout and have to wake it. Idle longer than this, the thread sleeps until woken.
constexpr std::chrono::seconds linger{1};

[[noreturn]] void fail(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

}  // namespace

reactor::reactor() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) fail("epoll_create1");
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    ::close(epoll_fd_);
    fail("eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = wake_token;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    ::close(wake_fd_);
    ::close(epoll_fd_);
    fail("epoll_ctl");
  }
}

reactor::~reactor() {
  stop();
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

void reactor::arm_locked(int fd, watch what, id name) {
  // One-shot: the descriptor reports once, then stays silent until it is armed again.
  epoll_event ev{};
  ev.events = (what == watch::writable ? EPOLLOUT : EPOLLIN | EPOLLRDHUP) | EPOLLONESHOT;
  ev.data.u64 = name;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0) {
    if (errno != ENOENT || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) fail("epoll_ctl");
  }
}

reactor::id reactor::add_locked(int fd, watch what, std::span<char> buffer, clock::time_point deadline,
                                read_handler h) {
  if (stopped_) return 0;
  if (!thread_.joinable()) thread_ = std::thread([self = shared_from_this()] { self->run_loop(); });
  const id name = next_id_++;
  if (fd >= 0) arm_locked(fd, what, name);
  registered_.emplace(name, registration{std::move(h), fd, what, buffer, deadline});
  deadlines_.emplace(std::pair{deadline, name}, name);
  if (fd >= 0) ++descriptors_;
  const clock::time_point noticed = fd >= 0 ? saturating_add(deadline, descriptor_slack) : deadline;
  if (noticed < sleeping_until_) wake_thread();
  return name;
}

reactor::id reactor::read_some(int fd, std::span<char> buffer, clock::time_point deadline, read_handler h) {
  std::lock_guard lock(mutex_);
  return add_locked(fd, watch::read, buffer, deadline, std::move(h));
}

reactor::id reactor::when_ready(int fd, readiness what, clock::time_point deadline, handler h) {
  std::lock_guard lock(mutex_);
  return add_locked(fd, what == readiness::writable ? watch::writable : watch::readable, {}, deadline,
                    [h = std::move(h)](wake why, std::size_t, int) { h(why); });
}

reactor::id reactor::at(clock::time_point when, handler h) {
  std::lock_guard lock(mutex_);
  return add_locked(-1, watch::read, {}, when, [h = std::move(h)](wake why, std::size_t, int) { h(why); });
}

bool reactor::cancel(id registration_id) {
  read_handler removed;  // destroyed outside the lock: it may own anything
  std::lock_guard lock(mutex_);
  auto it = registered_.find(registration_id);
  if (it == registered_.end()) return false;
  removed = std::move(it->second.run);
  forget_locked(it);
  return true;
}

void reactor::forget_locked(std::unordered_map<id, registration>::iterator it) {
  deadlines_.erase(std::pair{it->second.deadline, it->first});
  if (it->second.fd >= 0) --descriptors_;
  registered_.erase(it);
}

void reactor::forget(int fd) {
  std::lock_guard lock(mutex_);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);  // ENOENT when it was never armed: nothing to undo
}

void reactor::wake_thread() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void reactor::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_ && !thread_.joinable() && registered_.empty()) return;
    stopped_ = true;
    wake_thread();
  }
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // stopped from one of its own callbacks: the loop ends when it returns
    } else {
      thread_.join();
    }
  }
  std::unordered_map<id, registration> left;
  {
    std::lock_guard lock(mutex_);
    left.swap(registered_);
    deadlines_.clear();
    descriptors_ = 0;
  }
  for (auto& [name, r] : left) {
    try {
      r.run(wake::stopped, 0, 0);
    } catch (...) {
      // Each callback reports through its own operation.
    }
  }
}

std::size_t reactor::threads() const {
  std::lock_guard lock(mutex_);
  return thread_.joinable() && !stopped_ ? 1 : 0;
}

void reactor::run_loop() {
  std::array<epoll_event, 64> events{};
  struct ready_call {
    read_handler run;
    wake why;
    std::size_t bytes = 0;
    int error = 0;
  };
  std::vector<ready_call> due;
  std::unique_lock lock(mutex_);
  while (!stopped_) {
    int timeout_ms = -1;
    const clock::time_point now_before = clock::now();
    if (descriptors_ > 0) last_descriptor_ = now_before;
    sleeping_until_ = clock::time_point::max();
    if (!deadlines_.empty()) sleeping_until_ = deadlines_.begin()->first.first;
    if (now_before - last_descriptor_ < linger) sleeping_until_ = std::min(sleeping_until_, now_before + descriptor_slack);
    if (sleeping_until_ != clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(sleeping_until_ - now_before);
      timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
    }
    lock.unlock();
    int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
    if (n < 0) n = 0;  // EINTR: look at the deadlines again
    lock.lock();
    for (int i = 0; i < n; ++i) {
      const id name = events[static_cast<std::size_t>(i)].data.u64;
      if (name == wake_token) {
        std::uint64_t drained = 0;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &drained, sizeof drained);
        continue;
      }
      auto it = registered_.find(name);
      if (it == registered_.end()) continue;  // cancelled meanwhile
      registration& r = it->second;
      if (r.what != watch::read) {
        due.push_back({std::move(r.run), wake::ready});
        forget_locked(it);
        continue;
      }
      ssize_t got = 0;
      do {
        got = ::recv(r.fd, r.buffer.data(), r.buffer.size(), MSG_DONTWAIT);
      } while (got < 0 && errno == EINTR);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        try {
          arm_locked(r.fd, r.what, name);  // nothing after all: wait for the next report
          continue;
        } catch (const std::system_error& e) {
          due.push_back({std::move(r.run), wake::ready, 0, e.code().value()});
        }
      } else {
        due.push_back({std::move(r.run), wake::ready, got > 0 ? static_cast<std::size_t>(got) : 0, got < 0 ? errno : 0});
      }
      forget_locked(it);
    }
    const clock::time_point now = clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first.first <= now) {
      auto it = registered_.find(deadlines_.begin()->second);
      due.push_back({std::move(it->second.run), wake::timed_out});
      forget_locked(it);
    }
    if (due.empty()) continue;
    sleeping_until_ = clock::time_point{};  // busy: registrations need not wake the thread
    lock.unlock();
    for (ready_call& c : due) {
      try {
        c.run(c.why, c.bytes, c.error);
      } catch (...) {
        // Each callback reports through its own operation; the reactor serves the others.
      }
    }
    due.clear();  // whatever the callbacks own goes before the lock is taken again
    lock.lock();
  }
}

}  // namespace idem::detail
