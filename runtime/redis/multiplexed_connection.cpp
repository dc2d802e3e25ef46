// runtime/redis/multiplexed_connection.cpp — one command connection that many callers pipeline on.
#include "multiplexed_connection.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <poll.h>
#include <sys/socket.h>

namespace idem::detail::redis {

// One caller's place in the reply queue: a blocking caller's lives on its stack until it is
// answered; an asynchronous one's on the heap, owned by the queue until its handler ran.
struct multiplexed_connection::call {
  std::span<reply_ptr> replies;
  std::size_t received = 0;
  bool blocking = false;
  bool answered = false;  // every reply arrived, or the connection broke
  bool failed = false;
  std::condition_variable turn;  // blocking caller: answered, or the reader role may be free
  exchange_handler done;         // asynchronous caller: set, and answered through it
  std::string failure;           // asynchronous caller: why it failed
  bool outcome_unknown = true;
};

namespace {

// The connection whose replies this thread is handing out (on_read): a call its handlers make
// on it is written with the others they make, in one write once they all ran.
thread_local const multiplexed_connection* delivering_here = nullptr;
// Beyond this much, commands held back that way are written at once.
constexpr std::size_t max_unsent = 64 * 1024;

}  // namespace

void multiplexed_connection::reader_deleter::operator()(redisReader* r) const noexcept { redisReaderFree(r); }

multiplexed_connection::multiplexed_connection(const endpoint& where, store_loop& loop)
    : conn_(where), loop_(loop), backend_(loop.backend()), command_timeout_(where.command_timeout), parser_(redisReaderCreate()),
      last_reply_(std::chrono::steady_clock::now()) {
  if (parser_ == nullptr) throw io_failure("cannot allocate a hiredis reply parser");
}

multiplexed_connection::~multiplexed_connection() { backend_->forget(conn_.fd()); }

std::string& multiplexed_connection::format(std::span<command> commands) {
  // Formatted outside the lock into a per-thread buffer: no allocation per call, and a buffer
  // that grew for a large payload is given back instead of kept for the thread's life.
  thread_local std::string wire;
  constexpr std::size_t kept_capacity = 64 * 1024;
  if (wire.capacity() > kept_capacity) std::string().swap(wire);
  wire.clear();
  for (const command& cmd : commands) cmd.append_to(wire);
  return wire;
}

void multiplexed_connection::exchange(std::span<command> commands, std::span<reply_ptr> replies, bool blocking) {
  const std::string& wire = format(commands);
  call me;
  me.replies = replies;
  me.blocking = blocking;
  finished_calls finished;
  std::unique_lock lock(mutex_);
  if (broken()) throw io_failure(failure_);
  // Queued before the write: once the bytes are out, nothing may fail between them and our place
  // in the queue, or our reply would go to the caller behind us.
  waiting_.push_back(&me);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  if (blocking) blocking_in_flight_.fetch_add(1, std::memory_order_relaxed);
  try {
    send_locked(wire);  // throws, having broken the connection (which fails `me` too), when it fails
  } catch (const io_failure&) {
    break_locked(failure_, finished);
    lock.unlock();
    answer(finished);
    throw;
  }

  std::deque<reply_ptr> arrived;
  while (!me.answered) {
    if (reading_) {
      me.turn.wait(lock);
      continue;
    }
    reading_ = true;
    lock.unlock();
    std::string failure;
    try {
      read_some(arrived);
    } catch (const std::exception& e) {  // io_failure, or bad_alloc while parsing
      failure = e.what();
    }
    lock.lock();
    reading_ = false;
    deliver_locked(arrived, finished);
    if (!failure.empty()) break_locked(std::move(failure), finished);
    if (!finished.empty()) {  // asynchronous calls this read answered: not under the lock
      lock.unlock();
      answer(finished);
      lock.lock();
    }
  }
  pass_reader_role_locked(finished);
  lock.unlock();
  answer(finished);
  if (me.failed) throw io_failure(failure_, /*outcome_unknown=*/true);  // sent, not answered
}

void multiplexed_connection::async_exchange(std::span<command> commands, std::span<reply_ptr> replies, bool blocking,
                                            exchange_handler done) {
  const std::string& wire = format(commands);
  auto me = std::make_unique<call>();
  me->replies = replies;
  me->blocking = blocking;
  me->done = std::move(done);
  finished_calls finished;
  {
    std::unique_lock lock(mutex_);
    if (broken()) {
      me->failed = true;
      me->failure = failure_;
      me->outcome_unknown = false;
      finished.push_back(std::move(me));
    } else {
      call* const placed = me.get();
      waiting_.push_back(me.release());
      in_flight_.fetch_add(1, std::memory_order_relaxed);
      if (blocking) blocking_in_flight_.fetch_add(1, std::memory_order_relaxed);
      try {
        if (delivering_here == this && unsent_.size() + wire.size() <= max_unsent) {
          unsent_ += wire;  // written by on_read once every handler of its batch ran
        } else {
          send_locked(wire);
        }
        pass_reader_role_locked(finished);
      } catch (const io_failure& e) {
        placed->outcome_unknown = e.outcome_unknown();
        break_locked(failure_, finished);
      }
    }
  }
  answer(finished);
}

void multiplexed_connection::pass_reader_role_locked(finished_calls& finished) {
  if (reading_ || waiting_.empty()) return;
  call& oldest = *waiting_.front();
  if (!oldest.done) {
    oldest.turn.notify_one();  // the oldest blocking caller's reply is the next to arrive
    return;
  }
  reading_ = true;
  try {
    const auto deadline = std::chrono::steady_clock::now() + command_timeout_;
    const event_loop::id armed = loop_.read_some(
        conn_.fd(), std::span<char>(loop_buffer_), deadline,
        [self = shared_from_this()](event_loop::wake why, std::size_t bytes, int error) {
          self->on_read(why, bytes, error);
        });
    if (armed == 0) {
      reading_ = false;
      break_locked("the store is being destroyed", finished);
    }
  } catch (const std::exception& e) {
    reading_ = false;
    break_locked(std::string("cannot watch the connection: ") + e.what(), finished);
  }
}

void multiplexed_connection::on_read(event_loop::wake why, std::size_t bytes, int error) {
  std::deque<reply_ptr> arrived;
  std::string failure;
  if (why == event_loop::wake::stopped) {
    failure = "the store is being destroyed";
  } else if (why == event_loop::wake::timed_out) {
    failure = "receive: no reply within the command timeout of " + std::to_string(command_timeout_.count()) + " ms";
  } else if (error != 0) {
    failure = std::string("receive: ") + std::strerror(error);
  } else if (bytes == 0) {
    failure = "receive: the server closed the connection";
  } else {
    try {
      parse(loop_buffer_.data(), bytes, arrived);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  finished_calls finished;
  {
    std::lock_guard lock(mutex_);
    reading_ = false;
    deliver_locked(arrived, finished);
    if (!failure.empty()) break_locked(std::move(failure), finished);
    pass_reader_role_locked(finished);
  }
  const multiplexed_connection* const outer = delivering_here;
  delivering_here = this;
  answer(finished);
  delivering_here = outer;
  {
    std::lock_guard lock(mutex_);
    if (!unsent_.empty()) {
      try {
        send_locked(std::string());  // what the handlers asked for, in one write
      } catch (const io_failure&) {
        break_locked(failure_, finished);
      }
    }
  }
  answer(finished);  // the calls a failed write broke, if any
}

void multiplexed_connection::answer(finished_calls& finished) const {
  for (std::unique_ptr<call>& c : finished) {
    // Each call goes as soon as its handler returns: the handler holds its caller's whole call, and
    // a batch of them freed together after the last one ran (dozens, with calls in flight) would
    // overflow the allocator's per-thread cache just after the next calls took what it had.
    const std::unique_ptr<call> answering = std::move(c);
    if (answering->failed) {
      const io_failure failure(answering->failure, answering->outcome_unknown);
      answering->done(&failure, answering->replies);
    } else {
      answering->done(nullptr, answering->replies);
    }
  }
  finished.clear();
}

// An event loop may have made the socket non-blocking (Asio does, for any wait on a descriptor):
// then EAGAIN comes at once instead of after the socket's timeout, and the blocking path waits
// for the socket itself, within what is left of the command timeout. True when it may try again.
bool multiplexed_connection::await_socket(short events, std::chrono::steady_clock::time_point deadline) const {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd p{conn_.fd(), events, 0};
  int ready = 0;
  do {
    ready = ::poll(&p, 1, static_cast<int>(left.count()));
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}

void multiplexed_connection::send_locked(const std::string& own) {
  // Commands held back for a batch go first: the order of writes is the order of replies. They are
  // written from unsent_ itself, which keeps its capacity for the next batch: grown anew for every
  // batch, it made several allocations per read, the last above the size malloc caches per thread.
  if (!unsent_.empty()) unsent_ += own;
  const std::string& wire = unsent_.empty() ? own : unsent_;
  struct emptied_at_exit {  // sent or not (a failure breaks the connection), unsent_ is done with
    std::string& held;
    ~emptied_at_exit() {
      held.clear();
      if (held.capacity() > 2 * max_unsent) std::string().swap(held);  // grown by a large `own`
    }
  } const emptied{unsent_};
  const int fd = conn_.fd();
  const auto deadline = std::chrono::steady_clock::now() + command_timeout_;
  std::size_t sent = 0;
  while (sent < wire.size()) {
    const ssize_t n = ::send(fd, wire.data() + sent, wire.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && await_socket(POLLOUT, deadline)) continue;
    const bool timed_out = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    failure_ = timed_out ? "send: the server accepted nothing within the command timeout of " +
                               std::to_string(command_timeout_.count()) + " ms"
                         : std::string("send: ") + std::strerror(errno);
    throw io_failure(failure_, /*outcome_unknown=*/sent > 0);
  }
}

void multiplexed_connection::read_some(std::deque<reply_ptr>& replies) {
  char buffer[16 * 1024];
  ssize_t n = 0;
  const auto deadline = std::chrono::steady_clock::now() + command_timeout_;
  for (;;) {
    n = ::recv(conn_.fd(), buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && await_socket(POLLIN, deadline)) continue;
    break;
  }
  if (n == 0) throw io_failure("receive: the server closed the connection");
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      throw io_failure("receive: no reply within the command timeout of " + std::to_string(command_timeout_.count()) +
                       " ms");
    }
    throw io_failure(std::string("receive: ") + std::strerror(errno));
  }
  parse(buffer, static_cast<std::size_t>(n), replies);
}

void multiplexed_connection::parse(const char* bytes, std::size_t size, std::deque<reply_ptr>& replies) {
  if (redisReaderFeed(parser_.get(), bytes, size) != REDIS_OK) {
    throw io_failure("receive: cannot buffer the reply");
  }
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(parser_.get(), &reply) != REDIS_OK) {
      throw io_failure(std::string("receive: protocol error: ") + parser_->errstr);
    }
    if (reply == nullptr) return;
    replies.emplace_back(static_cast<redisReply*>(reply));
  }
}

void multiplexed_connection::deliver_locked(std::deque<reply_ptr>& replies, finished_calls& finished) {
  if (!replies.empty()) last_reply_ = std::chrono::steady_clock::now();
  // At most one call finishes per reply: one allocation for the batch, not one per doubling.
  finished.reserve(finished.size() + std::min(replies.size(), waiting_.size()));
  while (!replies.empty() && !waiting_.empty()) {
    call& c = *waiting_.front();
    c.replies[c.received++] = std::move(replies.front());
    replies.pop_front();
    if (c.received < c.replies.size()) continue;
    waiting_.pop_front();
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    if (c.blocking) blocking_in_flight_.fetch_sub(1, std::memory_order_relaxed);
    c.answered = true;
    if (c.done) {
      finished.emplace_back(&c);
    } else {
      c.turn.notify_one();
    }
  }
  if (!replies.empty()) {
    replies.clear();
    break_locked("receive: a reply nobody asked for (the connection is out of step)", finished);
  }
}

void multiplexed_connection::break_locked(std::string reason, finished_calls& finished) {
  if (!broken()) {
    failure_ = std::move(reason);
    broken_.store(true, std::memory_order_release);
    // Close our side now, not when the last user lets go: Redis then drops what it has not run
    // yet instead of running it for nobody (a call that timed out must not claim a key later).
    // The descriptor stays open until destruction, so a concurrent reader cannot hit a reused one.
    ::shutdown(conn_.fd(), SHUT_RDWR);
  }
  for (call* c : waiting_) {
    c->failed = true;
    c->answered = true;
    if (c->done) {
      c->failure = failure_;
      finished.emplace_back(c);
    } else {
      c->turn.notify_one();
    }
  }
  waiting_.clear();
  unsent_.clear();
  in_flight_.store(0, std::memory_order_relaxed);
  blocking_in_flight_.store(0, std::memory_order_relaxed);
}

bool multiplexed_connection::usable(std::chrono::steady_clock::duration idle_for) {
  finished_calls finished;  // stays empty: nothing is in flight when the probe runs
  std::lock_guard lock(mutex_);
  if (broken()) return false;
  if (reading_ || !waiting_.empty()) return true;  // in use: a problem will show in the read
  if (std::chrono::steady_clock::now() - last_reply_ < idle_for) return true;
  char probe = 0;
  const ssize_t n = ::recv(conn_.fd(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
  break_locked(n == 0 ? "the server closed the connection while it was idle"
                      : n > 0 ? "bytes nobody asked for arrived while the connection was idle"
                              : std::string("the idle connection failed: ") + std::strerror(errno),
               finished);
  return false;
}

}  // namespace idem::detail::redis
