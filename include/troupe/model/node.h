// A node as Troupe sees it: static GPU facts (NodeInfo) plus what is allocated (NodeState).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/pod_contract.h"
#include "troupe/model/topology.h"

namespace troupe::model {

inline constexpr int64_t kMilliPerGpu = 1000;

// The GPU DRA driver's name, and its devices' attribute and capacity Troupe reads (NVIDIA's
// dra-driver-gpu publishes whole GPUs under these).
inline constexpr const char* kDefaultDraGpuDriver = "gpu.nvidia.com";

// What a node is, independent of what runs on it.
struct NodeInfo {
  std::string name;
  StringMap labels;
  std::string gpu_product;     // "" when the node has no product label
  int64_t gpu_memory_mib = 0;  // per GPU; 0 = unknown
  int gpu_count = 0;
  int64_t cpu_milli = 0;       // 0 = not tracked (the live extender leaves CPU to kube)
  int64_t memory_bytes = 0;    // 0 = not tracked
  int64_t max_pods = 0;        // 0 = not tracked
  bool unschedulable = false;  // cordoned
  std::shared_ptr<const GpuTopology> topology;
  // Its domain at each configured network topology level (topology_levels.h), widest
  // first; "" where the node has no such label. Filled by whoever knows the levels.
  std::vector<std::string> topology_domains;
  // Non-empty on a DRA-served node: that DRA driver (kube-scheduler's DynamicResources plugin)
  // chooses which devices a pod gets; Troupe only counts them (every holding is "unknown").
  std::string dra_driver;
};

// The raw facts an adapter found for a node (labels, annotations, allocatable quantities).
struct NodeFacts {
  std::string name;
  StringMap labels;
  StringMap annotations;
  std::string allocatable_gpus;  // "nvidia.com/gpu" allocatable (or capacity), "" if absent
  std::string cpu;               // quantity strings, "" if absent
  std::string memory;
  std::string pods;
  bool unschedulable = false;
  // What the ResourceSlices of a GPU DRA driver publish for this node (filled by the adapter
  // that watches them; dra_driver "" = none). Used only when the node has no device-plugin
  // nvidia.com/gpu, as kube-scheduler does: device-plugin GPUs win.
  std::string dra_driver;
  int dra_devices = 0;
  std::string dra_product;     // the devices' productName attribute, "" if absent
  int64_t dra_memory_mib = 0;  // their memory capacity, 0 if absent
};

// Built-in profiles, made once and shared by every node that uses them, so 10,000 nodes of
// one kind cost one topology. Thread-safe.
class TopologyCatalog {
 public:
  Result<std::shared_ptr<const GpuTopology>> profile(const std::string& name, int gpus);

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, int>, std::shared_ptr<const GpuTopology>> profiles_;
};

// Turns facts into a NodeInfo: GPU count from allocatable, else from a DRA driver's devices
// (the node is then DRA-served), else the gpu.count label; product and memory from labels (a
// DRA node's device attributes win where present); topology from the troupe.dev/gpu-topology annotation, else
// the troupe.dev/topology-profile label, else the profile matching the product. Errors name the label or
// annotation at fault.
Result<NodeInfo> nodeFromFacts(const NodeFacts& facts, TopologyCatalog& catalog);

// One pod's hold on a node.
struct Allocation {
  std::string pod_uid;
  std::string pod_key;  // namespace/name, for messages
  std::string node;
  std::vector<int> gpus;  // indices; empty with `unknown_gpus` > 0 when not known
  int64_t milli_per_gpu = kMilliPerGpu;
  int unknown_gpus = 0;  // GPUs held whose indices nobody told us
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  double topology_quality = 1.0;  // of the GPU set when Troupe chose it (1 = best possible)
  std::string gang;               // the gang key of a member, "" otherwise

  bool holdsGpus() const { return !gpus.empty() || unknown_gpus > 0; }
};

// A node and its allocations. Not thread-safe: the Scheduler guards it.
class NodeState {
 public:
  explicit NodeState(NodeInfo info);

  const NodeInfo& info() const { return info_; }
  void setInfo(NodeInfo info);  // keeps allocations; GPUs beyond the new count are dropped
  const GpuTopology& topology() const { return *info_.topology; }

  int gpuCount() const { return info_.gpu_count; }
  int64_t gpuUsedMilli(int gpu) const { return used_milli_[static_cast<size_t>(gpu)]; }
  int64_t gpuFreeMilli(int gpu) const { return kMilliPerGpu - used_milli_[static_cast<size_t>(gpu)]; }
  // GPUs with nothing on them, as a mask (ignores unknown holders, see wholeFreeCount). Kept
  // up to date by add/remove/setInfo, so filtering thousands of nodes reads one word per node
  // instead of each node's separately allocated per-GPU array.
  uint64_t fullyFreeMask() const { return free_mask_; }
  // Whole GPUs a new pod can still take: fully free GPUs minus those held by pods whose
  // indices are unknown.
  int wholeFreeCount() const;
  int unknownHeld() const { return unknown_held_; }
  int64_t usedMilliTotal() const;
  int64_t freeMilliTotal() const { return int64_t{gpuCount()} * kMilliPerGpu - usedMilliTotal(); }
  int64_t cpuUsed() const { return cpu_used_; }
  int64_t memoryUsed() const { return memory_used_; }
  int podCount() const { return static_cast<int>(allocations_.size()); }
  int gpuPodCount() const { return gpu_pods_; }  // of which hold GPUs (the others: CPU or memory)
  int sharedGpuCount() const;                    // GPUs partly used by fractional pods

  // Records an allocation. Fails (and changes nothing) on an index out of range, or a GPU
  // without the room the allocation claims.
  Status add(const Allocation& allocation);
  // Releases the pod's allocation; returns false when the pod held nothing here.
  bool remove(const std::string& pod_uid);
  const Allocation* find(const std::string& pod_uid) const;
  const std::map<std::string, Allocation>& allocations() const { return allocations_; }

  // A fingerprint of the facts the owner last built this node from (0 = none), so a caller
  // that is sent the same nodes again and again can skip rebuilding the unchanged ones.
  uint64_t factsFingerprint() const { return facts_fingerprint_; }
  void setFactsFingerprint(uint64_t fingerprint) { facts_fingerprint_ = fingerprint; }
  // Counts every change to what the node is or holds (setInfo, add, remove), so a caller that
  // remembers something computed from the node knows when it went stale.
  uint64_t changes() const { return changes_; }
  // A small number the owner gives each of its nodes (unique among them) to index side tables.
  uint32_t ordinal() const { return ordinal_; }
  void setOrdinal(uint32_t ordinal) { ordinal_ = ordinal; }

 private:
  void refreshFreeMask();
  void updateFreeBit(int gpu);

  NodeInfo info_;
  uint64_t free_mask_ = 0;
  uint64_t facts_fingerprint_ = 0;
  uint64_t changes_ = 0;
  uint32_t ordinal_ = 0;
  int unknown_held_ = 0;
  int gpu_pods_ = 0;
  int64_t cpu_used_ = 0;
  int64_t memory_used_ = 0;
  std::map<std::string, Allocation> allocations_;
  // Per GPU (the first gpu_count entries); inline rather than its own allocation, so scoring
  // thousands of nodes does not take one more cache miss per node. At most kMilliPerGpu each.
  std::array<int16_t, 64> used_milli_{};
};

}  // namespace troupe::model
