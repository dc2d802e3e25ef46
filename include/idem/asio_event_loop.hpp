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

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <idem/event_loop.hpp>

namespace idem::asio {

// idem::asio::event_loop
//
// Reads and readiness waits are the io_context's own (async_read_some and async_wait on a
// descriptor registered once, until forget()), times are steady_timers; read deadlines are checked by one timer every 50 ms while
// any read is pending. Thread-safe; create it with std::make_shared.
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

  [[nodiscard]] id read_some(int fd, std::span<char> buffer, clock::time_point deadline, read_handler h) override {
    std::lock_guard lock(mutex_);
    auto& d = descriptor_locked(fd);
    const id name = next_++;
    entries_.emplace(name, entry{std::move(h), fd, deadline, nullptr});
    ++watching_;
    d.async_read_some(boost::asio::buffer(buffer.data(), buffer.size()),
                       [weak = weak_from_this(), name](const boost::system::error_code& ec, std::size_t bytes) {
                         if (ec == boost::asio::error::operation_aborted) return;  // cancelled: answered already
                         const int error = !ec || ec == boost::asio::error::eof ? 0 : ec.value();
                         fire(weak, name, wake::ready, ec ? 0 : bytes, error);
                       });
    tick_locked();
    return name;
  }

  [[nodiscard]] id when_ready(int fd, readiness what, clock::time_point deadline, handler h) override {
    std::lock_guard lock(mutex_);
    auto& d = descriptor_locked(fd);
    const id name = next_++;
    entries_.emplace(name, entry{[h = std::move(h)](wake why, std::size_t, int) { h(why); }, fd, deadline, nullptr});
    ++watching_;
    using boost::asio::posix::descriptor_base;
    d.async_wait(what == readiness::writable ? descriptor_base::wait_write : descriptor_base::wait_read,
                 [weak = weak_from_this(), name](const boost::system::error_code& ec) {
                   if (ec == boost::asio::error::operation_aborted) return;  // cancelled: answered already
                   fire(weak, name, wake::ready, 0, 0);
                 });
    tick_locked();
    return name;
  }

  [[nodiscard]] id at(clock::time_point when, handler h) override {
    std::lock_guard lock(mutex_);
    const id name = next_++;
    auto timer = std::make_unique<boost::asio::steady_timer>(io_, when);
    timer->async_wait([weak = weak_from_this(), name](const boost::system::error_code& ec) {
      if (!ec) fire(weak, name, wake::timed_out, 0, 0);
    });
    entries_.emplace(name, entry{[h = std::move(h)](wake why, std::size_t, int) { h(why); }, -1, when, std::move(timer)});
    return name;
  }

  bool cancel(id registration) override {
    entry dropped;  // destroyed outside the lock: its handler may own anything
    {
      std::lock_guard lock(mutex_);
      auto it = entries_.find(registration);
      if (it == entries_.end()) return false;
      dropped = std::move(it->second);
      entries_.erase(it);
      stop_locked(dropped);
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
    read_handler run;
    int fd = -1;  // -1: a timer
    clock::time_point deadline;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };

  // The io_context's object for `fd`, made on first use (it does not own `fd`: forget() lets go).
  boost::asio::posix::stream_descriptor& descriptor_locked(int fd) {
    auto& d = descriptors_[fd];
    if (d == nullptr) {
      try {
        d = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd);
      } catch (...) {
        descriptors_.erase(fd);
        throw;
      }
    }
    return *d;
  }

  // An entry taken out before its operation completed: the operation is cancelled (a read then
  // writes nothing more into its buffer).
  void stop_locked(entry& e) {
    if (e.fd >= 0) {
      --watching_;
      auto d = descriptors_.find(e.fd);
      if (d != descriptors_.end()) d->second->cancel();
    }
    if (e.timer != nullptr) e.timer->cancel();
  }

  static void fire(const std::weak_ptr<event_loop>& weak, id name, wake why, std::size_t bytes, int error) {
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
    taken.run(why, bytes, error);
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
          it = entries_.erase(it);
          stop_locked(due.back());
        } else {
          ++it;
        }
      }
      tick_locked();
    }
    for (entry& e : due) e.run(wake::timed_out, 0, 0);
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
