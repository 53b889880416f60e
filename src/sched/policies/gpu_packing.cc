// gpu-packing: the FGD paper's GPU-packing: already shared GPUs first, then used nodes that open the fewest
// fresh GPUs, then untouched nodes. The rule itself is in baseline_scores.cc, next to the artifact's other
// rules.
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/baseline_scores.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {

PolicyEntry gpuPackingPolicy() {
  return rulePolicy({"gpu-packing", [](const model::NodeState& node, const GpuRequest& req) {
                       return static_cast<double>(gpuPackingScore(node, req));
                     }});
}

}  // namespace troupe::sched
