#include "troupe/sim/workload.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "troupe/sched/score/best_node.h"

namespace troupe::sim {

RunPlan planRun(const std::vector<TracePod>& pods, int node_count, int64_t capacity_milli, int64_t seed,
                double tune_ratio) {
  RunPlan plan{{}, {}, GoRandom(seed), 0};
  GoRandom& rng = plan.random;
  rng.int63();
  const int n = static_cast<int>(pods.size());
  plan.order.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) plan.order[static_cast<size_t>(i)] = i;
  rng.shuffle(n, [&](int i, int j) {
    std::swap(plan.order[static_cast<size_t>(i)], plan.order[static_cast<size_t>(j)]);
  });
  int64_t total = 0;
  bool any_gpu = false;
  for (const TracePod& p : pods) {
    total += p.gpuRequestMilli();
    any_gpu = any_gpu || p.gpu_milli > 0;
  }
  const double target = tune_ratio * static_cast<double>(capacity_milli);
  // Without GPU pods no clone moves the total, so there is nothing to tune.
  if (any_gpu && static_cast<double>(total) < target) {
    while (true) {
      const int pick = rng.intn(n);
      const TracePod& p = pods[static_cast<size_t>(pick)];
      // The artifact's stop test compares the per-GPU milli, not the pod's total.
      if (static_cast<double>(total + p.gpu_milli) > target) break;
      total += p.gpuRequestMilli();
      plan.order.push_back(pick);
      ++plan.clones;
    }
  }
  for (int i = 0; i < 10; ++i) rng.int63();
  plan.node_rank = rng.perm(node_count);
  return plan;
}

RunPlan planInOrder(int pod_count, const std::vector<std::string>& node_names, int64_t seed) {
  RunPlan plan{{}, {}, GoRandom(seed), 0};
  plan.order.resize(static_cast<size_t>(pod_count));
  std::iota(plan.order.begin(), plan.order.end(), 0);
  std::vector<int> by_rank(node_names.size());
  std::iota(by_rank.begin(), by_rank.end(), 0);
  std::sort(by_rank.begin(), by_rank.end(), [&](int a, int b) {
    return sched::nodeTieRank(node_names[static_cast<size_t>(a)]) <
           sched::nodeTieRank(node_names[static_cast<size_t>(b)]);
  });
  plan.node_rank.resize(node_names.size());
  for (size_t r = 0; r < by_rank.size(); ++r)
    plan.node_rank[static_cast<size_t>(by_rank[r])] = static_cast<int>(r);
  return plan;
}

}  // namespace troupe::sim
