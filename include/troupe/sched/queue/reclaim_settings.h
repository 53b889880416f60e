// The reclaim settings of the config file's queues section: one struct, read by the yaml adapter
// and held as it is by SchedulerConfig, so the two never drift apart.
#pragma once

#include <chrono>

namespace troupe::sched {

struct ReclaimSettings {
  // A pod may be reclaimed only after running this long.
  std::chrono::milliseconds min_runtime{std::chrono::minutes(5)};
  // Off leaves admission and fair share on but never plans evictions.
  bool enabled = true;
  // A reclaim in flight is given up (and may be planned again) after this long.
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};
};

}  // namespace troupe::sched
