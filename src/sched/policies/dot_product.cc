// dot-product: the FGD paper's Dot-product (Tetris): the node whose free resources align least with the pod's
// request. The rule itself is in baseline_scores.cc, next to the artifact's other rules.
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/baseline_scores.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {

PolicyEntry dotProductPolicy() {
  return rulePolicy({"dot-product", [](const model::NodeState& node, const GpuRequest& req) {
                       return static_cast<double>(dotProductScore(node, req));
                     }});
}

}  // namespace troupe::sched
