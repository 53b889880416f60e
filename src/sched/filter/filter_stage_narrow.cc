#include "troupe/sched/filter/filter_stage_narrow.h"

#include <memory>
#include <vector>

#include "troupe/sched/filter/node_filter.h"

namespace troupe::sched {

ModelPressure modelPressureOf(const ClusterState& cluster, const RequestMix& mix) {
  if (mix.constrained().empty()) return {};
  FreeGpuByProduct free;
  cluster.forEachNode([&](const model::NodeState& node) {
    free.add(node);
    return true;
  });
  return ModelPressure::compute(mix, free.list());
}

WholeNodePressure wholeNodePressureOf(const ClusterState& cluster, const RequestMix& mix) {
  const std::vector<WholeNodeDemand>& demand = mix.wholeNodeDemand();
  if (demand.empty()) return {};
  WholeNodeTally tally(demand);
  cluster.forEachNode([&](const model::NodeState& node) {
    tally.add(node);
    return true;
  });
  return tally.pressure();
}

bool narrowStage(FilterCycle& cycle, const FilterParts& parts) {
  if (!parts.narrow_to_best || cycle.out.passed.size() <= 1 || !cycle.nodes_known) return true;
  const std::shared_ptr<const RequestMix> mix = parts.mix_window.current();
  const ModelPressure pressure = modelPressureOf(parts.cluster, *mix);
  const WholeNodePressure whole = wholeNodePressureOf(parts.cluster, *mix);
  const int best =
      narrowToBest(*parts.policy, cycle.request, mix, parts.remember_scores ? &parts.score_memo : nullptr,
                   cycle.passed_nodes, cycle.out, &pressure, &whole);
  cycle.passed_nodes.assign(1, cycle.passed_nodes[static_cast<size_t>(best)]);
  return true;
}

}  // namespace troupe::sched
