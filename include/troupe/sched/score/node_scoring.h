// Building blocks the policies (src/sched/policies/) share: the FGD paper's GPU choice, FGD's
// fragmentation points, and how full a node gets.
#pragma once

#include <cstdint>
#include <string>

#include "troupe/model/node.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/placement.h"

namespace troupe::sched {

// FGD's evaluation of placing the pod: its integer score for F before and after. Sharing pods
// try every GPU that fits and keep the best (lowest index among equal scores); other pods take
// the GPUs in `taken` (a mask). With `waste_weight` > 0 (troupe), a sharing pod's score counts
// F's change plus waste_weight x the change in the eventual waste of the GPU it takes
// (RequestMix::fragmentWaste); `delta` stays F's change alone.
struct FragEval {
  int points = 0;    // FGD's integer score
  double delta = 0;  // F_after - F_before, milli-GPU
  int gpu = -1;      // for sharing pods: the GPU evaluated best
};
FragEval evalFragmentation(const model::NodeState& node, const GpuRequest& req, const ScoreContext& context,
                           uint64_t taken, double waste_weight = 0.0);

// The FGD paper's GPU choice, described: the lowest-index free GPUs, the tightest GPU for a
// share, none for a CPU-only pod.
Placement paperPlacement(const model::NodeState& node, const GpuRequest& req);
// The paper's GPU choice with `value`: what the paper's plain scoring rules return.
NodeScore paperScore(const model::NodeState& node, const GpuRequest& req, double value);

// A policy that ranks by one formula of the node and the pod, on the paper's GPU choice
// (best-fit, dot-product, gpu-packing, gpu-clustering, kube, binpack, spread). Its unitScore is
// the value over `full_scale`, clamped to 0..1.
struct ScoreRule {
  std::string name;
  double (*value)(const model::NodeState& node, const GpuRequest& req) = nullptr;
  double full_scale = 100;  // the FGD paper's rules score 0..100
  TieBreak ties = TieBreak::kNodeOrder;
};
PolicyEntry rulePolicy(ScoreRule rule);

// The node's GPU use after the pod, 0..1 (binpack, spread).
double packAfter(const model::NodeState& node, const GpuRequest& req);
// The node's CPU left after the pod, in whole percent of its CPU (0..100, floored); 100 for a
// node that does not track CPU.
int cpuLeftPercentAfter(const model::NodeState& node, const GpuRequest& req);

// The lowest-index fully free GPUs (what the artifact's exclusive allocation does).
Placement lowestFreePlacement(const model::NodeState& node, int gpus);
// The fitting GPU with the least room left, lowest index among equals; -1 when none fits.
int tightestGpu(const model::NodeState& node, int64_t milli);
// Fills topology_quality, best_possible and bottleneck for the GPUs in `placement`.
void describePlacement(const model::GpuTopology& topology, Placement& placement);

}  // namespace troupe::sched
