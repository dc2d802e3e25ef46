// tests/support/eventually.hpp — a bounded wait for a condition that no event announces (a server
// process exiting, a caller starting to wait inside a store), shared by every test target.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace idem::test {

// Checks `condition` every 10 ms until it holds or `timeout` passes; returns whether it held.
// Give a generous timeout: it catches a hang, never a slow machine.
inline bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace idem::test
