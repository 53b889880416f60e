// Placement on one node: can the pod go there (checkNode), which GPUs it gets (placeOnNode),
// Pure functions of a NodeState; what a placement is worth is its Policy's (policy.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

enum class Fit {
  kFits,
  kBusy,   // not now: GPUs are taken (preemption or waiting may help) -> FailedNodes
  kNever,  // not on this node, whatever runs there -> FailedAndUnresolvableNodes
};

struct NodeCheck {
  Fit fit = Fit::kFits;
  std::string reason;         // short and node-independent so kube-scheduler groups them well
  const char* category = "";  // for metrics: no-gpus, model, memory, count, topology, resources, busy
};

// Why a node cannot take a pod, without the words. Filter rejects thousands of nodes for a
// handful of reasons: it finds each node's misfit and words each distinct one once.
enum class Misfit : uint8_t {
  kNone,  // the pod fits
  kNoGpus,
  kNoProductLabel,
  kModel,  // the only misfit whose words depend on the node (its GPU product)
  kNoMemoryLabel,
  kMemory,
  kCount,
  kNoNVLinkDomain,
  kCpuTotal,
  kMemoryTotal,
  kCpuFree,
  kMemoryFree,
  kPodLimit,
  kNoSharedGpu,
  kFewFreeGpus,
  kSplitDomains,
  kDraShared,    // a GPU share on a DRA-served node (DRA hands out whole devices)
  kDraTopology,  // an NVLink requirement on a DRA-served node (DRA chooses the devices)
  kNeedsDra,     // GPUs asked through ResourceClaims, on a node no GPU DRA driver serves
  kEnd,          // not a misfit: the number of kinds. New kinds go above it, and arrays indexed by
                 // Misfit (kMisfitKinds long) grow with them.
};
inline constexpr size_t kMisfitKinds = static_cast<size_t>(Misfit::kEnd);

// Cheap feasibility: model, memory, count, NVLink domain size, free GPUs. No set search.
Misfit findMisfit(const model::NodeState& node, const GpuRequest& req);
Fit fitOf(Misfit misfit);
const char* categoryOf(Misfit misfit);  // "" for kNone
// The reason kube-scheduler shows for the misfit ("" for kNone).
std::string describeMisfit(Misfit misfit, const model::NodeState& node, const GpuRequest& req);
// findMisfit with its fit, words and category.
NodeCheck checkNode(const model::NodeState& node, const GpuRequest& req);

struct Placement {
  std::vector<int> gpus;
  // On a DRA-served node: the GPUs the pod will hold, which DRA (not Troupe) chooses; `gpus`
  // is then empty and the holding is recorded as that many GPUs at unknown indices.
  int dra_gpus = 0;
  double topology_quality = 1.0;  // 1 = as well connected as any k GPUs of this node can be
  bool best_possible = true;      // the set's bottleneck equals the node's best for k GPUs
  double bottleneck = 0.0;        // GB/s; 0 for single-GPU and shared placements
};

// The bandwidth a GPU set is judged against in absolute terms: NVLink4 through NVSwitch
// (H100/H200), per direction. Faster sets score the same as this.
inline constexpr double kReferenceBandwidth = 450.0;

// The GPUs the pod would get on this node, or nullopt when it does not fit.
std::optional<Placement> placeOnNode(const model::NodeState& node, const GpuRequest& req);

}  // namespace troupe::sched
