// What filter answers for one pod: the nodes that passed, and why each other node did not.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "troupe/sched/filter/node_reasons.h"

namespace troupe::sched {

struct FilterResult {
  std::vector<std::string> passed;  // in request order
  NodeReasons failed;               // preemption may help
  NodeReasons unresolvable;         // it cannot
  // Rejection counts by category, for metrics: "invalid-pod", "unknown-node", "no-gpus",
  // "model", "memory", "count", "topology", "busy", "gang", "drain".
  std::map<std::string, int> categories;
};

}  // namespace troupe::sched
