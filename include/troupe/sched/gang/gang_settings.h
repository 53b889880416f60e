// The gang settings of the config file's gang section: one struct, read by the yaml adapter and
// held as it is by SchedulerConfig, so the two never drift apart.
#pragma once

#include <chrono>
#include <cstddef>

namespace troupe::sched {

struct GangSettings {
  // The default bind-barrier wait (troupe.dev/gang-timeout overrides it per gang).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // The longest bind-barrier wait a pod's troupe.dev/gang-timeout may ask for (longer asks are
  // capped, and the GangPlanned event says so). It must stay below kube-scheduler's extender
  // httpTimeout: a bind released after kube-scheduler gave up on the call binds a pod it
  // already put back in its queue.
  std::chrono::milliseconds max_timeout{std::chrono::minutes(5)};
  // At most this many gangs are tracked; the filter of a pod that would start one more is
  // refused with a reason (a flood of made-up gang names must not grow memory without bound).
  size_t max_gangs = 10000;
};

}  // namespace troupe::sched
