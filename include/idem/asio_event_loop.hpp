// idem/asio_event_loop.hpp — idem::event_loop on a Boost.Asio io_context (target idem::asio): a
// store handed it reads its replies and runs its timers on the io_context's threads.
//
//   boost::asio::io_context io;
//   idem::redis_store_options options;
//   options.event_loop = std::make_shared<idem::asio::event_loop>(io);
//   idem::redis_store store(options);  // asynchronous calls complete on `io`, no thread in between
//
// The loop must outlive the stores that use it, and the io_context the loop. While the io_context
// is not run, the stores' asynchronous calls on it do not progress (their blocking calls are not
// affected).
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <idem/event_loop.hpp>

namespace idem::asio {

// idem::asio::event_loop
//
// Descriptors are watched with the io_context's reactor (each registered once, until forget()),
// times with steady_timers; descriptor deadlines are checked by one timer every 50 ms while any
// descriptor is watched. A registration made after the descriptor became readable completes at
// once, as level-triggered readiness would. Thread-safe; create it with std::make_shared.
class event_loop final : public idem::event_loop, public std::enable_shared_from_this<event_loop> {
 public:
  explicit event_loop(boost::asio::io_context& io) : io_(io), ticker_(io) {}
  ~event_loop() override {
    std::lock_guard lock(mutex_);
    for (auto& [fd, d] : descriptors_) d->release();  // the descriptor belongs to its store
    entries_.clear();
  }
  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;

  [[nodiscard]] id when_readable(int fd, clock::time_point deadline, handler h) override {
    std::lock_guard lock(mutex_);
    auto& d = descriptors_[fd];
    if (d == nullptr) {
      try {
        d = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd);
      } catch (...) {
        descriptors_.erase(fd);
        throw;
      }
    }
    const id name = next_++;
    entries_.emplace(name, entry{std::move(h), fd, deadline, nullptr});
    ++watching_;
    d->async_wait(boost::asio::posix::descriptor_base::wait_read,
                  [weak = weak_from_this(), name](const boost::system::error_code&) { fire(weak, name, wake::ready); });
    // The wait completes on the next readiness event; bytes that came before it was queued are
    // seen here instead.
    pollfd probe{fd, POLLIN, 0};
    if (::poll(&probe, 1, 0) > 0) {
      boost::asio::post(io_, [weak = weak_from_this(), name] { fire(weak, name, wake::ready); });
    }
    tick_locked();
    return name;
  }

  [[nodiscard]] id at(clock::time_point when, handler h) override {
    std::lock_guard lock(mutex_);
    const id name = next_++;
    auto timer = std::make_unique<boost::asio::steady_timer>(io_, when);
    timer->async_wait([weak = weak_from_this(), name](const boost::system::error_code& ec) {
      if (!ec) fire(weak, name, wake::timed_out);
    });
    entries_.emplace(name, entry{std::move(h), -1, when, std::move(timer)});
    return name;
  }

  bool cancel(id registration) override {
    entry dropped;  // destroyed outside the lock: its handler may own anything
    {
      std::lock_guard lock(mutex_);
      auto it = entries_.find(registration);
      if (it == entries_.end()) return false;
      dropped = std::move(it->second);
      if (dropped.fd >= 0) --watching_;
      if (dropped.timer != nullptr) dropped.timer->cancel();
      entries_.erase(it);
    }
    return true;
  }

  void forget(int fd) override {
    std::lock_guard lock(mutex_);
    auto it = descriptors_.find(fd);
    if (it == descriptors_.end()) return;
    it->second->release();
    descriptors_.erase(it);
  }

 private:
  struct entry {
    handler run;
    int fd = -1;  // -1: a timer
    clock::time_point deadline;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };

  static void fire(const std::weak_ptr<event_loop>& weak, id name, wake why) {
    const std::shared_ptr<event_loop> self = weak.lock();
    if (self == nullptr) return;
    entry taken;
    {
      std::lock_guard lock(self->mutex_);
      auto it = self->entries_.find(name);
      if (it == self->entries_.end()) return;  // answered already, or cancelled
      taken = std::move(it->second);
      if (taken.fd >= 0) --self->watching_;
      self->entries_.erase(it);
    }
    taken.run(why);
  }

  // Keeps the deadline sweep running while descriptors are watched.
  void tick_locked() {
    if (ticking_ || watching_ == 0) return;
    ticking_ = true;
    ticker_.expires_after(sweep_period);
    ticker_.async_wait([weak = weak_from_this()](const boost::system::error_code&) {
      if (auto self = weak.lock()) self->sweep();
    });
  }

  void sweep() {
    std::vector<entry> due;
    {
      std::lock_guard lock(mutex_);
      ticking_ = false;
      const clock::time_point now = clock::now();
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->second.fd >= 0 && it->second.deadline <= now) {
          due.push_back(std::move(it->second));
          --watching_;
          it = entries_.erase(it);
        } else {
          ++it;
        }
      }
      tick_locked();
    }
    for (entry& e : due) e.run(wake::timed_out);
  }

  static constexpr std::chrono::milliseconds sweep_period{50};

  boost::asio::io_context& io_;
  std::mutex mutex_;
  std::unordered_map<int, std::unique_ptr<boost::asio::posix::stream_descriptor>> descriptors_;
  std::unordered_map<id, entry> entries_;
  std::size_t watching_ = 0;
  bool ticking_ = false;
  boost::asio::steady_timer ticker_;
  id next_ = 1;
};

}  // namespace idem::asio
