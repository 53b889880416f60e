// Filter stage 5 (filter_cycle.h): checks each candidate node for the pod on its own
// (filterEachNode over the model, with the nodes gangs drain kept from it). Writes out (passed,
// failed, unresolvable) and the state of each passed node. Under the model lock.
#pragma once

#include <string>
#include <vector>

#include "troupe/sched/filter/filter_cycle.h"

namespace troupe::sched {

bool checkNodesStage(FilterCycle& cycle, const FilterParts& parts);

// The node checks of a pod on its own, or of a member of the admitted gang `own_gang` (whose
// drained nodes it may use). With `passed_nodes`, also each passing node's state, in order.
FilterResult filterSingle(const ClusterState& cluster, const GangBook& gangs, const GpuRequest& req,
                          const std::vector<std::string>& node_names, const std::string& own_gang = "",
                          std::vector<const model::NodeState*>* passed_nodes = nullptr);

}  // namespace troupe::sched
