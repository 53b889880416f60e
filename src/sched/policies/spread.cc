// spread: the emptiest node after the pod wins (GPU use, 0..1).
#include "troupe/sched/node_scoring.h"
#include "troupe/sched/policy_registry.h"

namespace troupe::sched {

PolicyEntry spreadPolicy() {
  return rulePolicy(
      {"spread",
       [](const model::NodeState& node, const GpuRequest& req) { return 1.0 - packAfter(node, req); }, 1.0});
}

}  // namespace troupe::sched
