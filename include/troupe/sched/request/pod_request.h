// The pod contract: what a pod asks of Troupe, parsed and validated in one place (the keys:
// troupe/model/pod_contract.h).
//
//   resources nvidia.com/gpu: N        whole GPUs (requests or limits; init containers count
//                                      as Kubernetes counts them: max(sum(app), max(init)))
//   troupe.dev/gpu-model: A,B          allowed GPU products (nvidia.com/gpu.product), any case
//   troupe.dev/gpu-memory: 40Gi        minimum memory per GPU (a Kubernetes quantity)
//   troupe.dev/gpu-topology: nvlink    all GPUs inside one NVLink domain, else the node fails
//                            preferred (default) the best-connected set wins the score
//                            none      topology is ignored
//   troupe.dev/gpu-milli: 500          a share of one GPU (1..1000) for pods that do not
//                                      request nvidia.com/gpu
//                                      (or the resource troupe.dev/gpu-milli: 500, which
//                                      kube-scheduler's managedResources can route to Troupe)
//   troupe.dev/topology-required: rack  gang members all inside one domain of that network
//                                       topology level, or the gang is not admitted
//   troupe.dev/topology-preferred: block  one domain of that level if any fits, else the
//                                       fewest domains. Levels are the configured label keys,
//                                       their short names or an alias such as nvlink-domain
//                                       (topology_levels.h); a pod on its own sits on one node
//                                       and ignores both.
// Annotations win over labels of the same key. Every error names the key, the value and what
// is expected, because it ends up in `kubectl describe pod`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/pod_contract.h"
#include "troupe/model/topology_levels.h"

namespace troupe::sched {

// One entry of spec.resourceClaims: a DRA ResourceClaim the pod uses, named directly or made
// from a template (its generated name is in status.resourceClaimStatuses once created).
struct PodClaim {
  std::string name;           // the entry's name, which containers refer to
  std::string claim_name;     // the ResourceClaim's name, when known
  std::string template_name;  // resourceClaimTemplateName, when the claim comes from one

  bool operator==(const PodClaim&) const = default;
};

struct ContainerResources {
  StringMap requests;
  StringMap limits;
  bool restartable_init = false;  // a sidecar: init container with restartPolicy Always
};

// The parts of a v1.Pod that scheduling reads; adapters fill it from JSON.
struct PodFacts {
  std::string ns;
  std::string name;
  std::string uid;
  StringMap labels;
  StringMap annotations;
  std::vector<ContainerResources> containers;
  std::vector<ContainerResources> init_containers;
  int64_t priority = 0;
  std::string node_name;
  std::string phase;
  // spec.schedulingGroup.podGroupName: the native PodGroup (scheduling.k8s.io/v1alpha2) the
  // pod belongs to; empty when none.
  std::string scheduling_group;
  // spec.schedulingGates[].name: while any remain, kube-scheduler does not schedule the pod
  // (e.g. Kueue holds it behind kueue.x-k8s.io/admission or kueue.x-k8s.io/topology).
  std::vector<std::string> scheduling_gates;
  StringMap node_selector;  // spec.nodeSelector
  std::vector<PodClaim> resource_claims;
  // status.extendedResourceClaimStatus.resourceClaimName: the claim kube-scheduler made for
  // an extended-resource request that a DRA driver serves (DRAExtendedResource).
  std::string extended_resource_claim;
  // The GPUs its ResourceClaims ask of the GPU device classes, filled by an adapter that knows
  // the claims (the core reads no API): 0 = none, -1 = a claim it names is not known yet.
  int claim_gpus = 0;

  std::string key() const { return ns + "/" + name; }
};

// Fills PodFacts::claim_gpus from the ResourceClaims an adapter watches (docs/dra.md).
using ClaimGpuLookup = std::function<int(const PodFacts&)>;

enum class TopologyMode { kPreferred, kNVLink, kNone };
const char* topologyModeName(TopologyMode mode);

struct GpuRequest {
  int gpus = 0;                     // GPUs the pod needs (1 for a shared pod)
  int64_t milli_per_gpu = 1000;     // 1000 = whole GPUs; less = a share of one GPU
  std::vector<std::string> models;  // allowed products; empty = any
  int64_t min_memory_bytes = 0;     // per GPU; 0 = any
  TopologyMode topology = TopologyMode::kPreferred;
  // Network topology levels for gangs: indices into the configured levels, -1 = none.
  // A preferred level is never wider than a required one.
  int topology_required = -1;
  int topology_preferred = -1;
  // The GPUs come from ResourceClaims only: a DRA-served node must serve them (a device plugin
  // cannot serve a claim).
  bool dra_only = false;
  int64_t cpu_milli = 0;  // the pod's requests, used where the model tracks them
  int64_t memory_bytes = 0;

  bool operator==(const GpuRequest&) const = default;
  bool wantsGpus() const { return gpus > 0; }
  bool shared() const { return gpus == 1 && milli_per_gpu < 1000; }
  int64_t totalMilli() const { return gpus * milli_per_gpu; }
};

// Reads the pod's GPU request. InvalidArgument names the annotation or resource at fault.
// `topology_levels` are the configured network topology levels the topology annotations may
// name.
Result<GpuRequest> parseGpuRequest(
    const PodFacts& pod, const std::vector<std::string>& topology_levels = model::defaultTopologyLevels());

// The CPU (millicores) and memory (bytes) a pod requests, counted as Kubernetes counts them
// (max(sum(app), max(init)), sidecars included): what it holds on its node once bound. Read
// apart from the GPU request, so a running pod with an unusable GPU annotation still counts
// its CPU.
struct PodCompute {
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
};
Result<PodCompute> podCompute(const PodFacts& pod);

// Reads the troupe.dev/gpus assignment annotation ("0,1,2,3"); `gpus` is how many the pod
// requests, used to check the list.
Result<std::vector<int>> parseGpuAssignment(const std::string& text);

}  // namespace troupe::sched
