// runtime/postgres/cancel_worker.cpp — PQcancel on a thread of its own.
#include "cancel_worker.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

namespace idem::detail::pg {
namespace {

// Cancels waiting to be sent. More would only queue behind a postmaster that does not answer.
constexpr std::size_t max_queued = 64;

}  // namespace

struct cancel_worker::state {
  std::mutex mutex;
  std::condition_variable changed;
  struct item {
    PGcancel* handle;
    std::promise<bool> sent;
  };
  std::deque<item> queue;
  bool stop = false;
  bool exited = false;
  std::atomic<std::uint64_t> requested{0};
  std::atomic<std::uint64_t> delivered{0};

  void drop_queue() {
    for (item& i : queue) {
      PQfreeCancel(i.handle);
      i.sent.set_value(false);
    }
    queue.clear();
  }
  ~state() { drop_queue(); }
};

cancel_worker::cancel_worker(std::chrono::milliseconds join_bound)
    : join_bound_(join_bound), state_(std::make_shared<state>()) {}

cancel_worker::~cancel_worker() {
  std::unique_lock lock(state_->mutex);
  state_->stop = true;
  state_->drop_queue();
  state_->changed.notify_all();
  if (!thread_.joinable()) return;
  const bool ended = state_->changed.wait_for(lock, join_bound_, [&] { return state_->exited; });
  lock.unlock();
  if (ended) {
    thread_.join();
  } else {
    thread_.detach();  // stuck in PQcancel on a frozen postmaster; it owns what it touches
  }
}

std::future<bool> cancel_worker::request(PGconn* conn) {
  std::promise<bool> sent;
  std::future<bool> answer = sent.get_future();
  PGcancel* handle = PQgetCancel(conn);
  if (handle == nullptr) {
    sent.set_value(false);
    return answer;
  }
  std::lock_guard lock(state_->mutex);
  if (state_->stop || state_->queue.size() >= max_queued) {
    PQfreeCancel(handle);
    sent.set_value(false);
    return answer;
  }
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([s = state_] { run(s); });
    } catch (...) {  // no thread: no cancel; statement_timeout still bounds a running statement
      PQfreeCancel(handle);
      sent.set_value(false);
      return answer;
    }
  }
  state_->queue.push_back({handle, std::move(sent)});
  state_->requested.fetch_add(1, std::memory_order_relaxed);
  state_->changed.notify_all();
  return answer;
}

std::uint64_t cancel_worker::requested() const noexcept {
  return state_->requested.load(std::memory_order_relaxed);
}

std::uint64_t cancel_worker::delivered() const noexcept {
  return state_->delivered.load(std::memory_order_relaxed);
}

void cancel_worker::run(const std::shared_ptr<state>& s) {
  std::unique_lock lock(s->mutex);
  for (;;) {
    s->changed.wait(lock, [&] { return s->stop || !s->queue.empty(); });
    if (s->stop) break;
    state::item next = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    char error[256];
    // Blocks until the postmaster has taken the request (or refused the connection).
    const bool ok = PQcancel(next.handle, error, sizeof error) == 1;
    if (ok) s->delivered.fetch_add(1, std::memory_order_relaxed);
    PQfreeCancel(next.handle);
    next.sent.set_value(ok);
    lock.lock();
  }
  s->exited = true;
  s->changed.notify_all();
}

}  // namespace idem::detail::pg
