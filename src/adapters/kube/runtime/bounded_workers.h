// Bounded concurrency for API calls: at most `width` calls in flight, items taken in order.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace troupe::kube {

// Calls each(i) for i in [0, count) on up to `width` threads (the caller's among them); a worker
// stops taking items once each() returns false. Returns when every worker has finished.
template <typename Each>
void forEachBounded(size_t count, size_t width, Each&& each) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      if (!each(i)) return;
    }
  };
  std::vector<std::jthread> workers;
  for (size_t t = 1; t < std::min(std::max<size_t>(1, width), count); ++t) workers.emplace_back(work);
  work();
}

}  // namespace troupe::kube
