// One entry point for every policy: what placing a pod on a node is worth, and which GPUs the
// policy takes there. The simulator ranks nodes by it (ties by a seeded node order, as the FGD
// artifact does); the live extender maps it onto kube-scheduler's 0..10.
#pragma once

#include <cstdint>
#include <optional>

#include "troupe/model/node.h"
#include "troupe/sched/fragmentation.h"
#include "troupe/sched/placement.h"
#include "troupe/sched/policy.h"
#include "troupe/sched/request_mix.h"

namespace troupe::sched {

// What a policy may consult beyond the node and the pod.
struct ScoreContext {
  const RequestMix* mix = nullptr;      // fgd, troupe: the request mix; nullptr = defaults()
  FragmentationCache* cache = nullptr;  // memo of F for `mix`; optional, not thread-safe
};

struct NodeScore {
  double value = 0;     // higher wins; the FGD paper's policies give whole numbers
  Placement placement;  // the GPUs this policy takes on the node
};

// The pod on a node that passed checkNode. Random scores every node alike here: its choice is
// a draw the caller makes.
NodeScore scoreNode(const PolicyConfig& policy, const model::NodeState& node, const GpuRequest& req,
                    const ScoreContext& context);

// The same for the live extender, on 0..1 for the placement it already chose. Random is a
// hash of the node's name and load: it varies across nodes and pods without hidden state.
double unitScore(const PolicyConfig& policy, const model::NodeState& node, const GpuRequest& req,
                 const Placement& placement, const ScoreContext& context);

// Troupe's blend, 0..1: the configured weights of how full the node gets (pack), how well the
// chosen GPUs are connected (topology) and whether untouched NVLink domains stay whole.
double troupeBlend(const PolicyConfig& policy, const model::NodeState& node, const GpuRequest& req,
                   const Placement& placement);

// How a policy breaks ties between equally scored nodes: a fixed node order (the FGD artifact's
// patched kube-scheduler, and Troupe), or at random (the stock kube-scheduler).
enum class TieBreak { kNodeOrder, kRandom };
TieBreak tieBreakOf(PolicyKind kind);

// Placement helpers shared by the policies.
// The lowest-index fully free GPUs (what the artifact's exclusive allocation does).
Placement lowestFreePlacement(const model::NodeState& node, int gpus);
// The fitting GPU with the least room left, lowest index among equals; -1 when none fits.
int tightestGpu(const model::NodeState& node, int64_t milli);
// Fills topology_quality, best_possible and bottleneck for the GPUs in `placement`.
void describePlacement(const model::GpuTopology& topology, Placement& placement);

}  // namespace troupe::sched
