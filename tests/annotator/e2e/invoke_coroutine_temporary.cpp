// Must not compile: idem::invoke of a coroutine whose `const std::string&` parameter is given a
// string literal. The std::string made from it would be destroyed when invoke returns, before the
// coroutine reads it.
#include <boost/asio/awaitable.hpp>

#include <idem/engine.hpp>

#include "coroutines.idem.hpp"

boost::asio::awaitable<void> remember_literal(idem::engine& engine) {
  return idem::invoke<&shop::remember>(engine, "refunded;");
}
