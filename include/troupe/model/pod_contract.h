// The contract with Kubernetes objects: every label, annotation and resource key Troupe reads or
// writes, defined here once, each with its meaning. A pod's keys are read as annotations or labels
// (the annotation wins). Parsed in src/sched/request/pod_request.cc (a pod's GPU request), gang.cc (gangs),
// queue_membership.cc (queues), kueue_pods.cc (Kueue) and src/model/node.cc (nodes).
//
// scripts/check-pod-contract.py (run by scripts/test.sh) keeps README.md's pod contract table
// equal to the section "What a pod asks for its GPUs" and every key below documented.
#pragma once

#include <map>
#include <string>

namespace troupe::contract {

// An object's labels or annotations: key -> value.
using StringMap = std::map<std::string, std::string>;

// --- What a pod asks for its GPUs (README.md: The pod contract) ---
// Whole GPUs: a container resource (and a node's allocatable).
inline constexpr const char* kGpuResource = "nvidia.com/gpu";
// Allowed GPU products, comma-separated.
inline constexpr const char* kAnnotationGpuModel = "troupe.dev/gpu-model";
// Minimum memory per GPU, a Kubernetes quantity.
inline constexpr const char* kAnnotationGpuMemory = "troupe.dev/gpu-memory";
// A pod's NVLink need (nvlink, preferred, none); on a node, its GPU link matrix.
inline constexpr const char* kAnnotationGpuTopology = "troupe.dev/gpu-topology";
// A share of one GPU, 1..1000 milli.
inline constexpr const char* kAnnotationGpuMilli = "troupe.dev/gpu-milli";
// The same share as an extended resource (limits: {troupe.dev/gpu-milli: 500}), so that
// kube-scheduler's managedResources sends the pod to Troupe.
inline constexpr const char* kResourceGpuMilli = kAnnotationGpuMilli;
// A gang's members all inside one domain of this topology level, or it is not admitted.
inline constexpr const char* kAnnotationTopologyRequired = "troupe.dev/topology-required";
// A gang in one domain of this level if one fits now, else the fewest domains.
inline constexpr const char* kAnnotationTopologyPreferred = "troupe.dev/topology-preferred";

// --- Gangs (gang.h: which key wins) ---
// The gang's name, in the namespace.
inline constexpr const char* kGangName = "troupe.dev/gang";
// Members that must run together.
inline constexpr const char* kGangSize = "troupe.dev/gang-size";
// How long a partly bound gang waits.
inline constexpr const char* kGangTimeout = "troupe.dev/gang-timeout";
// A gang's name, as scheduler-plugins' coscheduling labels it.
inline constexpr const char* kPodGroupLabel = "scheduling.x-k8s.io/pod-group";
// A gang's name, as Volcano annotates it.
inline constexpr const char* kVolcanoGroup = "scheduling.k8s.io/group-name";
// A gang's name, as Kueue's pod groups set it.
inline constexpr const char* kKueueGroup = "kueue.x-k8s.io/pod-group-name";
// A Kueue gang's size.
inline constexpr const char* kKueueTotal = "kueue.x-k8s.io/pod-group-total-count";

// --- Queues (queue_membership.h: which key wins) ---
// The pod's Troupe queue.
inline constexpr const char* kQueueKey = "troupe.dev/queue";
// Kueue's LocalQueue: the queue of that name.
inline constexpr const char* kKueueQueueName = "kueue.x-k8s.io/queue-name";
// On a Namespace: the queue its pods join when they name none.
inline constexpr const char* kNamespaceDefaultQueue = "troupe.dev/default-queue";

// --- Kueue's topology-aware scheduling (kueue_pods.h) ---
// "true": Kueue's topology-aware scheduling chose where the pod runs.
inline constexpr const char* kKueueTasLabel = "kueue.x-k8s.io/tas";
// A node's name as a label: Kueue pins a pod to one node by it.
inline constexpr const char* kHostnameLabel = "kubernetes.io/hostname";

// --- What Troupe writes on a pod ---
// The GPU indices bound, "0,1,2,3".
inline constexpr const char* kAnnotationGpus = "troupe.dev/gpus";
// Troupe's answer changed: retry now.
inline constexpr const char* kWakeAnnotation = "troupe.dev/wake";

// --- What Troupe reads of a node (NVIDIA GPU feature discovery; kAnnotationGpuTopology above) ---
// A node's GPU model, what troupe.dev/gpu-model matches.
inline constexpr const char* kLabelGpuProduct = "nvidia.com/gpu.product";
// A node's memory per GPU, in MiB.
inline constexpr const char* kLabelGpuMemory = "nvidia.com/gpu.memory";
// A node's GPU count.
inline constexpr const char* kLabelGpuCount = "nvidia.com/gpu.count";
// A topology profile by name (topology_presets.h) instead of a link matrix.
inline constexpr const char* kLabelTopologyProfile = "troupe.dev/topology-profile";

}  // namespace troupe::contract

// The model and the core name the keys unqualified (the adapters: contract::kWakeAnnotation).
namespace troupe::model {
using namespace troupe::contract;  // NOLINT(google-build-using-namespace): the contract's keys
}  // namespace troupe::model
namespace troupe::sched {
using namespace troupe::contract;  // NOLINT(google-build-using-namespace): the contract's keys
}  // namespace troupe::sched
