// kube: the stock kube-scheduler's resource scoring (LeastAllocated plus BalancedAllocation on
// CPU and memory, 0..200; baseline_scores.cc), ties broken at random as its selectHost does.
#include "troupe/sched/baseline_scores.h"
#include "troupe/sched/node_scoring.h"
#include "troupe/sched/policy_registry.h"

namespace troupe::sched {

PolicyEntry kubePolicy() {
  return rulePolicy({"kube",
                     [](const model::NodeState& node, const GpuRequest& req) {
                       return static_cast<double>(kubeDefaultScore(node, req));
                     },
                     200.0, TieBreak::kRandom});
}

}  // namespace troupe::sched
