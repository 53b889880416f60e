// spread: the emptiest node after the pod wins (GPU use, 0..1).
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {

PolicyEntry spreadPolicy() {
  return rulePolicy(
      {"spread",
       [](const model::NodeState& node, const GpuRequest& req) { return 1.0 - packAfter(node, req); }, 1.0});
}

}  // namespace troupe::sched
