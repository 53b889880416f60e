// gpu-clustering: the FGD paper's GPU-clustering: nodes already hosting pods of the same kind first.
// The rule itself is in baseline_scores.cc, next to the artifact's other rules.
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/baseline_scores.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {

PolicyEntry gpuClusteringPolicy() {
  return rulePolicy({"gpu-clustering", [](const model::NodeState& node, const GpuRequest& req) {
                       return static_cast<double>(gpuClusteringScore(node, req));
                     }});
}

}  // namespace troupe::sched
