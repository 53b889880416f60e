// best-fit: the FGD paper's Best-fit: the least weighted leftover (0.5 CPU + 0.5 GPU) after the pod.
// The rule itself is in baseline_scores.cc, next to the artifact's other rules.
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/baseline_scores.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {

PolicyEntry bestFitPolicy() {
  return rulePolicy({"best-fit", [](const model::NodeState& node, const GpuRequest& req) {
                       return static_cast<double>(bestFitScore(node, req));
                     }});
}

}  // namespace troupe::sched
