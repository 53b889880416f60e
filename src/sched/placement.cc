#include "troupe/sched/placement.h"

#include <algorithm>
#include <bit>

#include "troupe/common/strings.h"
#include "troupe/model/gpu_selection.h"
#include "troupe/sched/node_scoring.h"

namespace troupe::sched {
namespace {

using model::kMilliPerGpu;
using model::NodeState;

bool modelAllowed(const std::string& product, const std::vector<std::string>& models) {
  if (models.empty()) return true;
  return std::any_of(models.begin(), models.end(),
                     [&](const std::string& m) { return equalsIgnoreCase(m, product); });
}

std::string gib(int64_t bytes) {
  double g = static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0fGi", g);
  return buf;
}

// A shared pod's GPU: an already shared GPU with the least room that still fits (packs
// fractions together), else a fully free GPU chosen like a whole 1-GPU pod.
std::optional<int> pickSharedGpu(const NodeState& node, int64_t milli) {
  int best = -1;
  for (int g = 0; g < node.gpuCount(); ++g) {
    int64_t used = node.gpuUsedMilli(g);
    if (used == 0 || node.gpuFreeMilli(g) < milli) continue;
    if (best < 0 || node.gpuFreeMilli(g) < node.gpuFreeMilli(best)) best = g;
  }
  if (best >= 0) return best;
  if (node.wholeFreeCount() < 1) return std::nullopt;
  auto set = model::chooseWholeGpus(node.topology(), node.fullyFreeMask(), 1, false);
  if (!set) return std::nullopt;
  return std::countr_zero(set->mask);
}

}  // namespace

NodeCheck checkNode(const NodeState& node, const GpuRequest& req) {
  const model::NodeInfo& info = node.info();
  if (info.gpu_count == 0) return {Fit::kNever, "troupe: node has no GPUs (nvidia.com/gpu)", "no-gpus"};
  if (!req.models.empty()) {
    if (info.gpu_product.empty()) {
      return {Fit::kNever, "troupe: node has no nvidia.com/gpu.product label to match troupe.dev/gpu-model",
              "model"};
    }
    if (!modelAllowed(info.gpu_product, req.models)) {
      return {Fit::kNever,
              "troupe: GPU model " + info.gpu_product + " is not in troupe.dev/gpu-model (" +
                  joinList(req.models, ",") + ")",
              "model"};
    }
  }
  if (req.min_memory_bytes > 0) {
    if (info.gpu_memory_mib == 0) {
      return {Fit::kNever, "troupe: node has no nvidia.com/gpu.memory label to check troupe.dev/gpu-memory",
              "memory"};
    }
    if (info.gpu_memory_mib * 1024 * 1024 < req.min_memory_bytes) {
      return {Fit::kNever, "troupe: GPU memory below troupe.dev/gpu-memory " + gib(req.min_memory_bytes),
              "memory"};
    }
  }
  if (req.gpus > info.gpu_count) {
    return {Fit::kNever, "troupe: node has fewer GPUs in total than the pod's " + std::to_string(req.gpus),
            "count"};
  }
  const model::GpuTopology& topo = node.topology();
  if (req.topology == TopologyMode::kNVLink && req.gpus > 1 &&
      std::popcount(topo.nvlinkDomains().front()) < req.gpus) {
    return {Fit::kNever,
            "troupe: no NVLink domain of " + std::to_string(req.gpus) +
                " GPUs on this node (troupe.dev/gpu-topology=nvlink)",
            "topology"};
  }
  if (info.cpu_milli > 0 && req.cpu_milli > info.cpu_milli) {
    return {Fit::kNever, "troupe: node has less CPU than the pod requests", "resources"};
  }
  if (info.memory_bytes > 0 && req.memory_bytes > info.memory_bytes) {
    return {Fit::kNever, "troupe: node has less memory than the pod requests", "resources"};
  }
  if (info.cpu_milli > 0 && node.cpuUsed() + req.cpu_milli > info.cpu_milli) {
    return {Fit::kBusy, "troupe: insufficient free CPU", "resources"};
  }
  if (info.memory_bytes > 0 && node.memoryUsed() + req.memory_bytes > info.memory_bytes) {
    return {Fit::kBusy, "troupe: insufficient free memory", "resources"};
  }
  if (info.max_pods > 0 && node.podCount() >= info.max_pods) {
    return {Fit::kBusy, "troupe: node is at its pod limit", "resources"};
  }
  if (req.shared()) {
    if (!pickSharedGpu(node, req.milli_per_gpu)) {
      return {Fit::kBusy, "troupe: no GPU has " + std::to_string(req.milli_per_gpu) + " milli-GPU free",
              "busy"};
    }
    return {Fit::kFits, ""};
  }
  if (node.wholeFreeCount() < req.gpus) {
    return {Fit::kBusy, "troupe: too few free GPUs for " + std::to_string(req.gpus), "busy"};
  }
  if (req.topology == TopologyMode::kNVLink && req.gpus > 1) {
    uint64_t free = node.fullyFreeMask();
    bool any = std::any_of(topo.nvlinkDomains().begin(), topo.nvlinkDomains().end(),
                           [&](uint64_t d) { return std::popcount(d & free) >= req.gpus; });
    if (!any) {
      return {Fit::kBusy,
              "troupe: free GPUs are split across NVLink domains (troupe.dev/gpu-topology=nvlink)",
              "topology"};
    }
  }
  return {Fit::kFits, ""};
}

std::optional<Placement> placeOnNode(const NodeState& node, const GpuRequest& req) {
  if (checkNode(node, req).fit != Fit::kFits) return std::nullopt;
  Placement p;
  if (req.shared()) {
    std::optional<int> g = pickSharedGpu(node, req.milli_per_gpu);
    if (!g) return std::nullopt;
    p.gpus = {*g};
    return p;
  }
  if (req.gpus == 0) return p;
  auto set = model::chooseWholeGpus(node.topology(), node.fullyFreeMask(), req.gpus,
                                    req.topology == TopologyMode::kNVLink);
  if (!set) return std::nullopt;
  p.gpus = model::maskToIndices(set->mask);
  p.topology_quality = req.topology == TopologyMode::kNone ? 1.0 : set->quality;
  p.best_possible = set->quality >= 1.0 - 1e-9;
  p.bottleneck = req.gpus > 1 ? set->bottleneck : 0.0;
  return p;
}

double scorePlacement(const NodeState& node, const GpuRequest& req, const Placement& placement,
                      const PolicyConfig& policy) {
  // Without a request window at hand, fragmentation is measured against the default mix.
  return unitScore(policy, node, req, placement, ScoreContext{});
}

}  // namespace troupe::sched
