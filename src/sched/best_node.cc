#include "troupe/sched/best_node.h"

namespace troupe::sched {

uint64_t nodeTieRank(std::string_view name) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

double nodeValue(const PolicyConfig& policy, const model::NodeState& node, const GpuRequest& req,
                 const ScoreContext& context) {
  return policy.kind == PolicyKind::kRandom ? unitScore(policy, node, req, Placement{}, context)
                                            : scoreNode(policy, node, req, context).value;
}

int bestByValue(const std::vector<const model::NodeState*>& nodes, std::span<const double> values) {
  int best = -1;
  double best_value = 0;
  uint64_t best_rank = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    // Exact comparisons, as the simulator's: the policies' whole-number steps are meant to tie.
    const double value = values[i];
    if (best >= 0 && !(value >= best_value)) continue;  // hash the name (the rank) only for ties
    const uint64_t rank = nodeTieRank(nodes[i]->info().name);
    if (best < 0 || value > best_value || rank < best_rank) {
      best = static_cast<int>(i);
      best_value = value;
      best_rank = rank;
    }
  }
  return best;
}

}  // namespace troupe::sched
