// Coroutines: a function returning boost::asio::awaitable<T> is guarded asynchronously, by
// idem::guarded<C>'s override and by idem::invoke; anything else that runs or completes after it
// returns is refused, since guarding the call that creates it would not guard its work.
#pragma once

#include <future>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <idem/json_codec.hpp>

struct Event {
  long id;
};

// Coroutine types of another library: they have a promise_type.
struct task {
  struct promise_type;
};
template <class T>
struct lazy {
  struct promise_type;
};

// Valid: the value type is replayed through the codec; awaitable<void> needs none.
struct Fine {
  [[idem::idempotent(key = "event.id", codec = "idem::json_codec")]] boost::asio::awaitable<int> a(const Event& event);
  [[idem::idempotent(key = "event.id")]] boost::asio::awaitable<void> b(const Event& event);
  // In a transaction its wrapper begins and carries, which join-transaction can join.
  [[idem::idempotent(key = "event.id", transaction = "required", completion = "join-transaction")]]
  boost::asio::awaitable<void> c(const Event& event);
  // On an executor type of its own: the wrapper completes on that type.
  [[idem::idempotent(key = "event.id", codec = "idem::json_codec")]]
  boost::asio::awaitable<int, boost::asio::io_context::executor_type> d(const Event& event);
};

struct Refused {
  // expected-error@+2:11 {{'Refused::a' returns 'std::future<int>', which runs or completes after it returns: idem cannot guard it, since guarding the call that creates it would not guard the work it does}}
  // expected-note@+1:11 {{supported: a function returning boost::asio::awaitable<T> (idem::invoke and idem::guarded<C>'s wrapper co_await idem::async_execute, <idem/asio.hpp>), or a function returning its result}}
  [[idem::idempotent(key = "event.id")]] std::future<int> a(const Event& event);
  // expected-error@+2:11 {{'Refused::b' returns 'task', which runs or completes after it returns: idem cannot guard it, since guarding the call that creates it would not guard the work it does}}
  // expected-note@+1:11 {{supported: a function returning boost::asio::awaitable<T> (idem::invoke and idem::guarded<C>'s wrapper co_await idem::async_execute, <idem/asio.hpp>), or a function returning its result}}
  [[idem::idempotent(key = "event.id")]] task b(const Event& event);
  // expected-error@+1:11 {{'Refused::c' produces 'int', so a duplicate call must be given that value back: name a codec that encodes it, for example codec = "idem::json_codec"}}
  [[idem::idempotent(key = "event.id")]] boost::asio::awaitable<int> c(const Event& event);
  // expected-error@+1:49 {{codec "idem::json_codec" is pointless: 'Refused::d' produces no value and has nothing to replay}}
  [[idem::idempotent(key = "event.id", codec = "idem::json_codec")]] boost::asio::awaitable<void> d(const Event& event);
  // expected-error@+1:54 {{completion "join-transaction" on a coroutine needs transaction = "required": a transaction bound to a thread does not survive a co_await, so a coroutine can join only the transaction its wrapper begins and carries; or use "autonomous"}}
  [[idem::idempotent(key = "event.id", completion = "join-transaction")]] boost::asio::awaitable<void> e(const Event& event);
  // expected-error@+2:11 {{'Refused::h' returns 'lazy<int>', which runs or completes after it returns: idem cannot guard it, since guarding the call that creates it would not guard the work it does}}
  // expected-note@+1:11 {{supported: a function returning boost::asio::awaitable<T> (idem::invoke and idem::guarded<C>'s wrapper co_await idem::async_execute, <idem/asio.hpp>), or a function returning its result}}
  [[idem::idempotent(key = "event.id", codec = "idem::json_codec")]] lazy<int> h(const Event& event);
};

// Valid too, guarded by idem::invoke alone: a static member, a member of a final class, a free
// function; their codecs are checked as for any coroutine.
struct Plain {
  [[idem::idempotent(key = "event.id")]] static boost::asio::awaitable<void> f(const Event& event);
};
struct Sealed final {
  [[idem::idempotent(key = "event.id", codec = "idem::json_codec")]] boost::asio::awaitable<long> g(const Event& event);
  // expected-error@+1:11 {{'Sealed::i' produces 'int', so a duplicate call must be given that value back: name a codec that encodes it, for example codec = "idem::json_codec"}}
  [[idem::idempotent(key = "event.id")]] boost::asio::awaitable<int> i(const Event& event);
};
[[idem::idempotent(key = "event.id", codec = "idem::json_codec")]] boost::asio::awaitable<int> settle(const Event& event);
// expected-error@+1:47 {{codec "idem::json_codec" is pointless: 'notify' produces no value and has nothing to replay}}
[[idem::idempotent(key = "event.id", codec = "idem::json_codec")]] boost::asio::awaitable<void> notify(const Event& event);
