// kube: the stock kube-scheduler's resource scoring (LeastAllocated plus BalancedAllocation on
// CPU and memory, 0..200; baseline_scores.cc), ties broken at random as its selectHost does.
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/baseline_scores.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {

PolicyEntry kubePolicy() {
  return rulePolicy({"kube",
                     [](const model::NodeState& node, const GpuRequest& req) {
                       return static_cast<double>(kubeDefaultScore(node, req));
                     },
                     200.0, TieBreak::kRandom});
}

}  // namespace troupe::sched
