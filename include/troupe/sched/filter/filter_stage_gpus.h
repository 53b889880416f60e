// Filter stage 8 (filter_cycle.h): with narrowing on, chooses the pod's GPUs on the one node
// left, exactly as a bind there would (chooseGpus), and writes them with what they were chosen
// from (ChosenGpus). recordCycle keeps them in the pod's pending record, and a bind onto that
// node while the node and the mix are unchanged reserves these GPUs: chosen once per cycle.
// Under the model lock.
#pragma once

#include <optional>

#include "troupe/sched/filter/filter_cycle.h"
#include "troupe/sched/score/placement.h"

namespace troupe::sched {

bool chooseGpusStage(FilterCycle& cycle, const FilterParts& parts);

// The GPUs the pod gets on `node`, nullopt when it does not fit: placeOnNode's set, and for a
// share the GPU the policy scores the node by (troupe and fgd: the share that fragments the
// node least), which is also the one the simulator takes. `mix`: nullptr = defaults.
std::optional<Placement> chooseGpus(const PolicyConfig& policy, const model::NodeState& node,
                                    const GpuRequest& req, const RequestMix* mix);

// `chosen` when it was chosen on `node` as it is now against `mix`, else nullopt.
std::optional<Placement> stillChosen(const std::optional<ChosenGpus>& chosen, const model::NodeState& node,
                                     const std::shared_ptr<const RequestMix>& mix);

}  // namespace troupe::sched
