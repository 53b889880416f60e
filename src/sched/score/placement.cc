#include "troupe/sched/score/placement.h"

#include <algorithm>
#include <bit>

#include "troupe/common/strings.h"
#include "troupe/model/gpu_selection.h"

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

Misfit findMisfit(const NodeState& node, const GpuRequest& req) {
  const model::NodeInfo& info = node.info();
  if (req.dra_only && info.dra_driver.empty()) return Misfit::kNeedsDra;
  if (info.gpu_count == 0) return Misfit::kNoGpus;
  if (!req.models.empty()) {
    if (info.gpu_product.empty()) return Misfit::kNoProductLabel;
    if (!modelAllowed(info.gpu_product, req.models)) return Misfit::kModel;
  }
  if (req.min_memory_bytes > 0) {
    if (info.gpu_memory_mib == 0) return Misfit::kNoMemoryLabel;
    if (info.gpu_memory_mib * 1024 * 1024 < req.min_memory_bytes) return Misfit::kMemory;
  }
  if (req.gpus > info.gpu_count) return Misfit::kCount;
  if (!info.dra_driver.empty()) {
    // DRA chooses the devices: Troupe checks only what it can promise, the count.
    if (req.shared()) return Misfit::kDraShared;
    if (req.topology == TopologyMode::kNVLink && req.gpus > 1) return Misfit::kDraTopology;
  }
  const model::GpuTopology& topo = node.topology();
  if (req.topology == TopologyMode::kNVLink && req.gpus > 1 &&
      std::popcount(topo.nvlinkDomains().front()) < req.gpus) {
    return Misfit::kNoNVLinkDomain;
  }
  if (info.cpu_milli > 0 && req.cpu_milli > info.cpu_milli) return Misfit::kCpuTotal;
  if (info.memory_bytes > 0 && req.memory_bytes > info.memory_bytes) return Misfit::kMemoryTotal;
  if (info.cpu_milli > 0 && node.cpuUsed() + req.cpu_milli > info.cpu_milli) return Misfit::kCpuFree;
  if (info.memory_bytes > 0 && node.memoryUsed() + req.memory_bytes > info.memory_bytes) {
    return Misfit::kMemoryFree;
  }
  if (info.max_pods > 0 && node.podCount() >= info.max_pods) return Misfit::kPodLimit;
  if (req.shared()) return pickSharedGpu(node, req.milli_per_gpu) ? Misfit::kNone : Misfit::kNoSharedGpu;
  if (node.wholeFreeCount() < req.gpus) return Misfit::kFewFreeGpus;
  if (req.topology == TopologyMode::kNVLink && req.gpus > 1) {
    const uint64_t free = node.fullyFreeMask();
    bool any = std::any_of(topo.nvlinkDomains().begin(), topo.nvlinkDomains().end(),
                           [&](uint64_t d) { return std::popcount(d & free) >= req.gpus; });
    if (!any) return Misfit::kSplitDomains;
  }
  return Misfit::kNone;
}

Fit fitOf(Misfit misfit) {
  switch (misfit) {
    case Misfit::kNone: return Fit::kFits;
    case Misfit::kCpuFree:
    case Misfit::kMemoryFree:
    case Misfit::kPodLimit:
    case Misfit::kNoSharedGpu:
    case Misfit::kFewFreeGpus:
    case Misfit::kSplitDomains: return Fit::kBusy;
    default: return Fit::kNever;
  }
}

const char* categoryOf(Misfit misfit) {
  switch (misfit) {
    case Misfit::kNone:
    case Misfit::kEnd: return "";
    case Misfit::kNoGpus: return "no-gpus";
    case Misfit::kNoProductLabel:
    case Misfit::kModel: return "model";
    case Misfit::kNoMemoryLabel:
    case Misfit::kMemory: return "memory";
    case Misfit::kCount: return "count";
    case Misfit::kNoNVLinkDomain:
    case Misfit::kSplitDomains: return "topology";
    case Misfit::kCpuTotal:
    case Misfit::kMemoryTotal:
    case Misfit::kCpuFree:
    case Misfit::kMemoryFree:
    case Misfit::kPodLimit: return "resources";
    case Misfit::kNoSharedGpu:
    case Misfit::kFewFreeGpus: return "busy";
    case Misfit::kDraShared:
    case Misfit::kDraTopology:
    case Misfit::kNeedsDra: return "dra";
  }
  return "";
}

// Short and node-independent (but for the model) so kube-scheduler groups them well.
std::string describeMisfit(Misfit misfit, const NodeState& node, const GpuRequest& req) {
  switch (misfit) {
    case Misfit::kNone:
    case Misfit::kEnd: return "";
    case Misfit::kNoGpus: return "troupe: node has no GPUs (nvidia.com/gpu)";
    case Misfit::kNoProductLabel:
      return "troupe: node has no nvidia.com/gpu.product label to match troupe.dev/gpu-model";
    case Misfit::kModel:
      return "troupe: GPU model " + node.info().gpu_product + " is not in troupe.dev/gpu-model (" +
             joinList(req.models, ",") + ")";
    case Misfit::kNoMemoryLabel:
      return "troupe: node has no nvidia.com/gpu.memory label to check troupe.dev/gpu-memory";
    case Misfit::kMemory:
      return "troupe: GPU memory below troupe.dev/gpu-memory " + gib(req.min_memory_bytes);
    case Misfit::kCount:
      return "troupe: node has fewer GPUs in total than the pod's " + std::to_string(req.gpus);
    case Misfit::kNoNVLinkDomain:
      return "troupe: no NVLink domain of " + std::to_string(req.gpus) +
             " GPUs on this node (troupe.dev/gpu-topology=nvlink)";
    case Misfit::kCpuTotal: return "troupe: node has less CPU than the pod requests";
    case Misfit::kMemoryTotal: return "troupe: node has less memory than the pod requests";
    case Misfit::kCpuFree: return "troupe: insufficient free CPU";
    case Misfit::kMemoryFree: return "troupe: insufficient free memory";
    case Misfit::kPodLimit: return "troupe: node is at its pod limit";
    case Misfit::kNoSharedGpu:
      return "troupe: no GPU has " + std::to_string(req.milli_per_gpu) + " milli-GPU free";
    case Misfit::kFewFreeGpus:
      if (!node.info().dra_driver.empty()) {
        return "troupe: DRA (" + node.info().dra_driver + ") chooses the devices on this node; Troupe " +
               "counted too few free GPUs for " + std::to_string(req.gpus);
      }
      return "troupe: too few free GPUs for " + std::to_string(req.gpus);
    case Misfit::kNeedsDra:
      return "troupe: the pod asks for GPUs through ResourceClaims, and no GPU DRA driver serves this node";
    case Misfit::kDraShared:
      return "troupe: DRA (" + node.info().dra_driver +
             ") serves whole GPUs on this node; a troupe.dev/gpu-milli share needs a device-plugin node";
    case Misfit::kDraTopology:
      return "troupe: DRA (" + node.info().dra_driver +
             ") chooses the devices on this node, so troupe.dev/gpu-topology=nvlink cannot be honoured "
             "there";
    case Misfit::kSplitDomains:
      return "troupe: free GPUs are split across NVLink domains (troupe.dev/gpu-topology=nvlink)";
  }
  return "";
}

NodeCheck checkNode(const NodeState& node, const GpuRequest& req) {
  const Misfit misfit = findMisfit(node, req);
  if (misfit == Misfit::kNone) return {Fit::kFits, ""};
  return {fitOf(misfit), describeMisfit(misfit, node, req), categoryOf(misfit)};
}

std::optional<Placement> placeOnNode(const NodeState& node, const GpuRequest& req) {
  if (findMisfit(node, req) != Misfit::kNone) return std::nullopt;
  Placement p;
  if (req.shared()) {
    std::optional<int> g = pickSharedGpu(node, req.milli_per_gpu);
    if (!g) return std::nullopt;
    p.gpus = {*g};
    return p;
  }
  if (req.gpus == 0) return p;
  if (!node.info().dra_driver.empty()) {
    p.dra_gpus = req.gpus;  // which ones is DRA's choice
    return p;
  }
  auto set = model::chooseWholeGpus(node.topology(), node.fullyFreeMask(), req.gpus,
                                    req.topology == TopologyMode::kNVLink);
  if (!set) return std::nullopt;
  p.gpus = model::maskToIndices(set->mask);
  p.topology_quality = req.topology == TopologyMode::kNone ? 1.0 : set->quality;
  p.best_possible = set->quality >= 1.0 - 1e-9;
  p.bottleneck = req.gpus > 1 ? set->bottleneck : 0.0;
  return p;
}

}  // namespace troupe::sched
