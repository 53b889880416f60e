#include "troupe/sched/score/best_node.h"

#include "troupe/sched/score/choose_node.h"

namespace troupe::sched {

uint64_t nodeTieRank(std::string_view name) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

int bestByValue(const Policy& policy, const std::vector<const model::NodeState*>& nodes,
                std::span<const double> values) {
  return chooseNode(
      nodes.size(), policy, TieBreak::kNodeOrder, [&](size_t i) { return values[i]; },
      [&](size_t i) { return nodeTieRank(nodes[i]->info().name); });
}

}  // namespace troupe::sched
