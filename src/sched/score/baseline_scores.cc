#include "troupe/sched/score/baseline_scores.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace troupe::sched {
namespace {

using model::kMilliPerGpu;
using model::NodeState;

int64_t cpuLeftOf(const NodeState& node) { return node.info().cpu_milli - node.cpuUsed(); }

// The GPU-pod kind GPU-clustering groups by: 0 = sharing, else the whole-GPU count.
int kindOf(int gpus, int64_t milli) { return gpus == 1 && milli < kMilliPerGpu ? 0 : gpus; }

}  // namespace

int64_t bestFitScore(const NodeState& node, const GpuRequest& req) {
  const double cpu = static_cast<double>(cpuLeftOf(node) - req.cpu_milli) / kBaselineMaxCpuMilli;
  const double gpu = static_cast<double>(node.freeMilliTotal() - req.totalMilli()) / kBaselineMaxGpuMilli;
  return static_cast<int64_t>(100 * (1 - (0.5 * cpu + 0.5 * gpu)));
}

int64_t dotProductScore(const NodeState& node, const GpuRequest& req) {
  const double cpu = static_cast<double>(cpuLeftOf(node)) / kBaselineMaxCpuMilli *
                     (static_cast<double>(req.cpu_milli) / kBaselineMaxCpuMilli);
  const double gpu = static_cast<double>(node.freeMilliTotal()) / kBaselineMaxGpuMilli *
                     (static_cast<double>(req.totalMilli()) / kBaselineMaxGpuMilli);
  return static_cast<int64_t>(100 * (1 - (cpu + gpu) / 2));
}

int64_t gpuPackingScore(const NodeState& node, const GpuRequest& req) {
  if (!req.wantsGpus()) return 0;
  const int n = node.gpuCount();
  if (node.usedMilliTotal() == 0) return std::max(33 - n, n);
  std::vector<int> order(static_cast<size_t>(n));
  for (int g = 0; g < n; ++g) order[static_cast<size_t>(g)] = g;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return node.gpuFreeMilli(a) < node.gpuFreeMilli(b); });
  int kept = 0, fresh = 0;
  int64_t s = 0;
  for (int g : order) {
    if (kept == req.gpus) break;
    const int64_t free = node.gpuFreeMilli(g);
    if (free < req.milli_per_gpu) continue;
    ++kept;
    if (free == kMilliPerGpu) ++fresh;
    s += free * 100 / kMilliPerGpu;
  }
  if (fresh > 0) return std::max(50 - fresh, 33);
  return std::max<int64_t>(100 - s / 10, 50);
}

int64_t gpuClusteringScore(const NodeState& node, const GpuRequest& req) {
  if (!req.wantsGpus()) return 0;
  const int kind = kindOf(req.gpus, req.milli_per_gpu);
  bool same = false, other = false;
  for (const auto& [uid, a] : node.allocations()) {
    if (a.gpus.empty()) continue;  // CPU-only pods are not recorded
    (kindOf(static_cast<int>(a.gpus.size()), a.milli_per_gpu) == kind ? same : other) = true;
  }
  const int64_t band = same ? (other ? 50 : 75) : (other ? 0 : 25);
  const int64_t capacity = kBaselineMaxGpuMilli;
  return band + 25 * (capacity - node.freeMilliTotal()) / capacity;
}

int64_t kubeDefaultScore(const NodeState& node, const GpuRequest& req) {
  const model::NodeInfo& info = node.info();
  // Fractions requested after placing the pod, per resource the node tracks.
  std::vector<std::pair<int64_t, int64_t>> resources;  // (requested after, allocatable)
  if (info.cpu_milli > 0) resources.emplace_back(node.cpuUsed() + req.cpu_milli, info.cpu_milli);
  if (info.memory_bytes > 0) resources.emplace_back(node.memoryUsed() + req.memory_bytes, info.memory_bytes);
  if (resources.empty()) return 0;
  int64_t least = 0;
  double mean = 0;
  std::vector<double> fractions;
  for (auto [requested, allocatable] : resources) {
    least += std::max<int64_t>(0, allocatable - requested) * 100 / allocatable;
    double f = std::min(1.0, static_cast<double>(requested) / static_cast<double>(allocatable));
    fractions.push_back(f);
    mean += f;
  }
  least /= static_cast<int64_t>(resources.size());
  mean /= static_cast<double>(fractions.size());
  double variance = 0;
  for (double f : fractions) variance += (f - mean) * (f - mean);
  const double sd = std::sqrt(variance / static_cast<double>(fractions.size()));
  const int64_t balanced = static_cast<int64_t>((1 - sd) * 100);
  return least + balanced;
}

}  // namespace troupe::sched
