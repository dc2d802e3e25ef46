// runtime/core/store_loop.cpp — the event loop a store's asynchronous calls wait on.
#include "store_loop.hpp"

#include <utility>
#include <vector>

namespace idem::detail {

namespace {

// The book whose handler this thread is running, if any: stop() called from that handler (its
// store let go of in its last completion) waits for every other handler, not for itself.
thread_local const void* book_running_here = nullptr;

}  // namespace

store_loop::store_loop(std::shared_ptr<event_loop> external) : loop_(std::move(external)) {
  if (loop_ == nullptr) {
    auto own = std::make_shared<reactor>();
    own_ = own.get();
    loop_ = std::move(own);
  }
}

store_loop::~store_loop() { stop(); }

void store_loop::book::fire(const std::weak_ptr<book>& self, id name, wake why, std::size_t bytes, int error) {
  const std::shared_ptr<book> b = self.lock();
  if (b == nullptr) return;
  read_handler run;
  {
    std::lock_guard lock(b->mutex);
    auto it = b->entries.find(name);
    if (it == b->entries.end()) return;  // cancelled, or answered by stop()
    run = std::move(it->second.run);
    b->entries.erase(it);
    ++b->running;
  }
  const void* const outer = book_running_here;
  book_running_here = b.get();
  try {
    run(why, bytes, error);
  } catch (...) {
    // Each handler reports through its own operation.
  }
  run = nullptr;  // what it owns goes before stop() may return
  book_running_here = outer;
  std::lock_guard lock(b->mutex);
  if (--b->running == 0) b->idle.notify_all();
}

template <class Register>
store_loop::id store_loop::add(Register&& in_loop, read_handler h) {
  id name = 0;
  {
    std::lock_guard lock(book_->mutex);
    if (book_->stopped) return 0;
    name = book_->next++;
    book_->entries.emplace(name, pending{std::move(h), 0});
  }
  id inner = 0;
  try {
    inner = in_loop([weak = std::weak_ptr<book>(book_), name](wake why, std::size_t bytes, int error) {
      book::fire(weak, name, why, bytes, error);
    });
  } catch (...) {
    std::lock_guard lock(book_->mutex);
    book_->entries.erase(name);
    throw;
  }
  std::lock_guard lock(book_->mutex);
  auto it = book_->entries.find(name);
  if (inner == 0) {  // the loop takes nothing any more
    if (it != book_->entries.end()) book_->entries.erase(it);
    return 0;
  }
  if (it != book_->entries.end()) it->second.inner = inner;
  return name;
}

store_loop::id store_loop::read_some(int fd, std::span<char> buffer, clock::time_point deadline, read_handler h) {
  return add([&](read_handler wrapped) { return loop_->read_some(fd, buffer, deadline, std::move(wrapped)); },
             std::move(h));
}

store_loop::id store_loop::when_ready(int fd, readiness what, clock::time_point deadline, handler h) {
  return add(
      [&](read_handler wrapped) {
        return loop_->when_ready(fd, what, deadline, [wrapped = std::move(wrapped)](wake why) { wrapped(why, 0, 0); });
      },
      [h = std::move(h)](wake why, std::size_t, int) { h(why); });
}

store_loop::id store_loop::at(clock::time_point when, handler h) {
  return add(
      [&](read_handler wrapped) {
        return loop_->at(when, [wrapped = std::move(wrapped)](wake why) { wrapped(why, 0, 0); });
      },
      [h = std::move(h)](wake why, std::size_t, int) { h(why); });
}

bool store_loop::cancel(id registration) {
  read_handler dropped;  // destroyed outside the lock: it may own anything
  id inner = 0;
  {
    std::lock_guard lock(book_->mutex);
    auto it = book_->entries.find(registration);
    if (it == book_->entries.end()) return false;
    dropped = std::move(it->second.run);
    inner = it->second.inner;
    book_->entries.erase(it);
  }
  if (inner != 0) loop_->cancel(inner);
  return true;
}

void store_loop::forget(int fd) { loop_->forget(fd); }

void store_loop::stop() {
  if (own_ != nullptr) own_->stop();  // runs what it still holds: the book answers `stopped`
  std::unordered_map<id, pending> left;
  {
    std::unique_lock lock(book_->mutex);
    book_->stopped = true;
    const std::size_t mine = book_running_here == book_.get() ? 1 : 0;
    book_->idle.wait(lock, [this, mine] { return book_->running == mine; });
    left.swap(book_->entries);
  }
  for (auto& [name, entry] : left) {
    if (entry.inner != 0) loop_->cancel(entry.inner);
  }
  for (auto& [name, entry] : left) {
    try {
      entry.run(wake::stopped, 0, 0);
    } catch (...) {
      // Each handler reports through its own operation.
    }
  }
}

}  // namespace idem::detail
