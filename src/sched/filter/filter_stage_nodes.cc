#include "troupe/sched/filter/filter_stage_nodes.h"

#include "troupe/sched/filter/node_filter.h"

namespace troupe::sched {

FilterResult filterSingle(const ClusterState& cluster, const GangBook& gangs, const GpuRequest& req,
                          const std::vector<std::string>& node_names, const std::string& own_gang,
                          std::vector<const model::NodeState*>* passed_nodes) {
  DrainOwner drain_owner;
  if (gangs.draining()) drain_owner = [&gangs](const std::string& node) { return gangs.drainOwner(node); };
  return filterEachNode(cluster.index(), req, node_names, drain_owner, own_gang, passed_nodes);
}

bool checkNodesStage(FilterCycle& cycle, const FilterParts& parts) {
  cycle.out =
      filterSingle(parts.cluster, parts.gangs, cycle.request, cycle.node_names, "", &cycle.passed_nodes);
  cycle.nodes_known = true;
  return true;
}

}  // namespace troupe::sched
