// Waiting for something another thread does, without a fixed sleep.
#pragma once

#include <chrono>
#include <thread>

namespace troupe::testing {

// Polls `done` every few milliseconds until it holds (true) or `limit` has passed (false).
template <typename F>
bool waitFor(F done, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace troupe::testing
