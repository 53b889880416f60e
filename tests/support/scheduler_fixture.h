// Test helpers for the Scheduler: a clock the test moves by hand, and GPU nodes added in one call.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::testing {

// Starts an hour after the epoch, so that "an hour ago" is still a valid time point.
struct FakeClock {
  sched::Clock::time_point t = sched::Clock::time_point{} + std::chrono::hours(1);
  void advance(std::chrono::milliseconds d) { t += d; }
};

// Nodes n0, n1, ... with `gpus` H100s each, added to `s`; their names.
inline std::vector<std::string> addGpuNodes(sched::Scheduler& s, int n, int gpus = 8) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    names.push_back("n" + std::to_string(i));
    REQUIRE(s.upsertNode(gpuNode(names.back(), gpus)).isOk());
  }
  return names;
}

}  // namespace troupe::testing
