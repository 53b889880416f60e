#include "troupe/sched/filter/filter_cycle.h"

#include <utility>

namespace troupe::sched {

void FilterCycle::refuseAll(const std::string& reason, const std::string& category) {
  out.unresolvable.addAll(node_names, reason);
  out.categories[category] = static_cast<int>(node_names.size());
}

void recordCycle(const FilterCycle& cycle, const FilterParts& parts) {
  if (cycle.pod.uid.empty()) return;
  const std::vector<std::string>& passed = cycle.out.passed;
  std::vector<uint32_t> ordinals;
  ordinals.reserve(passed.size());
  for (size_t i = 0; i < passed.size(); ++i) {
    const model::NodeState* node =
        cycle.nodes_known ? cycle.passed_nodes[i] : parts.cluster.index().find(passed[i]);
    if (node) ordinals.push_back(node->ordinal());
  }
  // Kueue's quota admitted a placed pod already: it charged no queue here.
  const std::string& queue = cycle.kueue_placed ? std::string() : cycle.queue;
  const int gang_min = cycle.in_gang ? cycle.gang->min_member : 0;
  parts.pending.recordPassed(cycle.pod.uid, cycle.seq, NodeOrdinalSet(std::move(ordinals)),
                             parts.cluster.births(), queue, gang_min, cycle.chosen);
}

}  // namespace troupe::sched
