#include "troupe/sched/filter/filter_stage_gpus.h"

#include <memory>
#include <utility>

namespace troupe::sched {

std::optional<Placement> chooseGpus(const PolicyConfig& policy, const model::NodeState& node,
                                    const GpuRequest& req, const RequestMix* mix) {
  std::optional<Placement> p = placeOnNode(node, req);
  if (!p || !req.shared()) return p;
  const Placement scored = scoreNode(policy, node, req, ScoreContext{mix, nullptr}).placement;
  if (scored.gpus.size() == 1 && scored.gpus[0] >= 0) p->gpus = scored.gpus;
  return p;
}

std::optional<Placement> stillChosen(const std::optional<ChosenGpus>& chosen, const model::NodeState& node,
                                     const std::shared_ptr<const RequestMix>& mix) {
  if (!chosen || chosen->ordinal != node.ordinal() || chosen->changes != node.changes() ||
      chosen->mix != mix) {
    return std::nullopt;
  }
  return chosen->placement;
}

bool chooseGpusStage(FilterCycle& cycle, const FilterParts& parts) {
  if (!parts.narrow_to_best || !cycle.nodes_known || cycle.passed_nodes.size() != 1 ||
      !cycle.request.wantsGpus() || cycle.pod.uid.empty()) {
    return true;
  }
  const model::NodeState& node = *cycle.passed_nodes.front();
  // Only a share's GPU depends on the mix.
  std::shared_ptr<const RequestMix> mix = cycle.request.shared() ? parts.mix_window.current() : nullptr;
  std::optional<Placement> p = chooseGpus(parts.policy, node, cycle.request, mix.get());
  if (p) cycle.chosen = ChosenGpus{node.ordinal(), node.changes(), std::move(mix), std::move(*p)};
  return true;
}

}  // namespace troupe::sched
