// The one node the policy ranks first, chosen exactly as `troupe simulate` chooses it
// (chooseNode): the highest value wins, equal values go to a fixed node order. The live filter
// can pass only this node (SchedulerConfig::narrow_to_best), so kube-scheduler, which takes a
// lone feasible node without scoring, places the pod where the simulator would.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/policies/policy.h"

namespace troupe::sched {

// A fixed pseudo-random order of nodes (FNV-1a of the name; lower wins a tie). Like the FGD
// artifact's seeded node order it packs equal scores onto the same nodes instead of
// scattering them, and it is stable across calls and restarts.
uint64_t nodeTieRank(std::string_view name);

// Index into `nodes` of the best node given every node's Policy::rankValue (values[i] for
// nodes[i]), or -1 when `nodes` is empty. Live there is no random stream: ties always go to
// nodeTieRank, whatever the policy's tie-break.
int bestByValue(const Policy& policy, const std::vector<const model::NodeState*>& nodes,
                std::span<const double> values);

}  // namespace troupe::sched
