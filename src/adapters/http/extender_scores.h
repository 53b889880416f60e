// The extender protocol's prioritize answer: an integer 0..10 per node (kube-scheduler's
// MaxExtenderPriority), mapped from the core's per-node values (Scheduler::prioritize).
//
// The best node gets 10 alone (ties go to the fixed node order, sched::nodeTieRank), so the
// choice survives kube-scheduler's random tie-break; every other node that fits spreads over
// 0..9 by value, so the runner-up still outranks the rest; a node the core marks as unknown or
// no longer fitting (a negative value) gets 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::http {

struct HostScore {
  std::string host;
  int64_t score = 0;  // 0..10
};

std::vector<HostScore> extenderScores(const std::vector<sched::HostValue>& values);

}  // namespace troupe::http
