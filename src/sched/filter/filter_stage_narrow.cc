#include "troupe/sched/filter/filter_stage_narrow.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "troupe/sched/filter/node_filter.h"

namespace troupe::sched {

ModelPressure modelPressureOf(const ClusterState& cluster, const RequestMix& mix) {
  if (mix.constrained().empty()) return {};
  std::vector<std::pair<std::string, int64_t>> free_by_product;
  cluster.forEachNode([&](const model::NodeState& node) {
    if (node.gpuCount() == 0) return true;
    const std::string& product = node.info().gpu_product;
    auto it = std::find_if(free_by_product.begin(), free_by_product.end(),
                           [&](const auto& p) { return p.first == product; });
    if (it == free_by_product.end()) it = free_by_product.insert(free_by_product.end(), {product, 0});
    it->second += node.freeMilliTotal();
    return true;
  });
  return ModelPressure::compute(mix, free_by_product);
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
