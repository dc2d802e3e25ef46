// runtime/core/store_loop.hpp — the event loop a store's asynchronous calls wait on, and the
// promise that none of them is left unanswered when the store goes.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>

#include <idem/event_loop.hpp>

#include "reactor.hpp"

namespace idem::detail {

// idem::detail::store_loop
//
// The caller's event loop when the store was given one (options.event_loop), else a reactor of
// the store's own. It keeps every registration the store made until its handler runs, so that
// stop() can answer those still pending with `stopped`, on the stopping thread, whichever loop
// runs them: after stop() no handler of the store runs, and none is lost. Thread-safe.
class store_loop final : public event_loop {
 public:
  // `external` may be null: then a reactor thread of the store's own.
  explicit store_loop(std::shared_ptr<event_loop> external);
  ~store_loop() override;
  store_loop(const store_loop&) = delete;
  store_loop& operator=(const store_loop&) = delete;

  [[nodiscard]] id read_some(int fd, std::span<char> buffer, clock::time_point deadline, read_handler h) override;
  [[nodiscard]] id when_ready(int fd, readiness what, clock::time_point deadline, handler h) override;
  [[nodiscard]] id at(clock::time_point when, handler h) override;
  bool cancel(id registration) override;
  void forget(int fd) override;
  // The loop the registrations go to (the caller's, or the store's own reactor).
  std::shared_ptr<event_loop> backend() const { return loop_; }
  // Waits for the handlers running now (but the caller's own, when a handler lets its store go),
  // then answers every pending registration `stopped`; later ones return 0.
  void stop();

 private:
  struct pending {
    read_handler run;
    id inner = 0;  // the loop's name for it (0 until the loop answered)
  };
  // Shared with the handlers registered in the loop, which may run after the store is gone.
  struct book {
    std::mutex mutex;
    std::condition_variable idle;  // running dropped to 0
    std::unordered_map<id, pending> entries;
    id next = 1;
    std::size_t running = 0;  // handlers running now, on the loop's threads
    bool stopped = false;
    // Runs the entry's handler if it is still pending.
    static void fire(const std::weak_ptr<book>& self, id name, wake why, std::size_t bytes, int error);
  };
  template <class Register>
  id add(Register&& in_loop, read_handler h);

  std::shared_ptr<event_loop> loop_;
  reactor* own_ = nullptr;  // loop_ when it is the store's own
  std::shared_ptr<book> book_ = std::make_shared<book>();
};

}  // namespace idem::detail
