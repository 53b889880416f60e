// The mix of requests a cluster sees: the "typical pods" that fragmentation is measured against.
//
// A GPU is fragmented for a request when it is free but too small for it, so fragmentation only
// means something relative to what will ask. Following FGD (Weng et al., ATC '23), the mix is
// the most frequent request shapes (CPU, milli-GPU per GPU, GPU count, allowed models) covering
// 95% of the requests, each with its frequency. CPU-only requests stay in: they use the CPU that
// GPU requests also need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

struct TypicalRequest {
  int64_t cpu_milli = 0;
  int64_t milli_per_gpu = 0;  // 0 for CPU-only requests
  int gpus = 0;
  std::vector<std::string> models;  // allowed GPU products; empty = any
  double probability = 0.0;
};

// A whole node's GPUs (the common 8-GPU machines): the request size that needs a whole node.
inline constexpr int kWholeNodeGpus = 8;

// Whole-node requests asking `cpu_milli` milli-CPU: `share` of the GPU request.
struct WholeNodeDemand {
  int64_t cpu_milli = 0;
  double share = 0.0;
};

// The GPU request of one list of allowed models, as a share of every GPU request in the mix's
// source (all of them, not only the typical ones): what the model-scarcity term reads.
struct ConstrainedShare {
  std::vector<std::string> models;
  double share = 0.0;  // of the total milli-GPU requested
};

class RequestMix {
 public:
  // The share of requests the typical shapes cover: the rare rest would only add noise to F
  // (figures: docs/placement-quality.md#the-troupe-policys-constants).
  static constexpr double kTypicalCoverage = 0.95;
  // The most frequent shapes of `requests` covering `coverage` (0..1] of them, renormalised.
  // Order: by count, descending; equal counts put the larger shape first (CPU, milli, GPUs,
  // models), as FGD does, so the float sums come out in the same order.
  // `cluster_cpu_per_gpu`: the GPU nodes' milli-CPU per milli-GPU (ClusterState::cpuPerGpu),
  // 0 when unknown; it decides cpuTight() and cpuBound().
  static RequestMix fromRequests(const std::vector<GpuRequest>& requests, double coverage = kTypicalCoverage,
                                 double cluster_cpu_per_gpu = 0.0);
  // Before any request is seen: one, two, four and eight whole GPUs, and halves of one.
  static const RequestMix& defaults();

  const std::vector<TypicalRequest>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  // Requests that name GPU models, by list; empty when none does.
  const std::vector<ConstrainedShare>& constrained() const { return constrained_; }
  // The part of the GPU request (milli-GPU) that shares a GPU: 0..1, 0 with no GPU request.
  double sharingShare() const { return sharing_share_; }
  // The part of the GPU request (milli-GPU) in requests of kWholeNodeGpus or more: 0..1.
  double wholeNodeShare() const { return whole_node_share_; }
  // The whole-node requests' demand by the CPU they ask beside their GPUs, ascending in CPU:
  // each level's share is the part of the GPU request in whole-node requests asking its
  // milli-CPU (up to the next level's); the shares add up to wholeNodeShare(). A node with less
  // CPU left than a level has no room for that level's pods, whatever GPUs it has free (8-GPU
  // pods ask 64-120 cores, and only some nodes have 120). At most kWholeNodeLevels levels;
  // empty with no whole-node request.
  const std::vector<WholeNodeDemand>& wholeNodeDemand() const { return whole_node_demand_; }
  // More distinct CPU requests are thinned to this many levels (the least always kept), so the
  // slot count per level stays a few passes over the nodes.
  static constexpr size_t kWholeNodeLevels = 4;
  // The typical requests' milli-CPU per milli-GPU (CPU-only requests included): 0 without GPU.
  double cpuPerGpu() const { return cpu_per_gpu_; }
  // The typical requests' CPU per GPU against the cluster's GPU nodes' (cpuPerGpu() over
  // ClusterState::cpuPerGpu); 0 when the cluster's is unknown.
  double cpuLoad() const { return cpu_load_; }
  // cpuLoad() of the GPU requests alone (their CPU only, over all GPU): the CPU GPU pods need
  // beside their GPUs, against what the GPU nodes have per GPU; 0 when the cluster's is unknown.
  double gpuPodsCpuLoad() const { return gpu_pods_cpu_load_; }
  // The GPU requests' milli-CPU per milli-GPU (their CPU only): what a free GPU will want beside it.
  double gpuPodsCpuPerGpu() const { return gpu_pods_cpu_per_gpu_; }
  // The part of `free_milli` (the free milli-GPU of one GPU, 0..1000) that stays unused for good
  // when the typical one-GPU requests that fit keep landing on it, each as often as the mix asks
  // for it, until none fits: its expected eventual waste. FGD's fragmentation counts only what
  // the next request cannot use, so it prefers to leave 210 milli (too small for nearly every
  // request) over 360 (that a 320-milli share later fills to 40); this counts the 210 as lost.
  double fragmentWaste(int64_t free_milli) const;
  // CPU, not GPUs, runs out first: the typical requests ask at least kCpuBoundLoad x the CPU per
  // GPU the GPU nodes have, so every milli-CPU a placement strands counts.
  bool cpuBound() const { return cpuRegimeOf(cpu_load_) == CpuRegime::kBound; }
  // CPU runs out about when GPUs do: kCpuTightLoad <= cpuLoad() < kCpuBoundLoad.
  bool cpuTight() const { return cpuRegimeOf(cpu_load_) == CpuRegime::kTight; }
  enum class CpuRegime { kRelaxed, kTight, kBound };
  static CpuRegime cpuRegimeOf(double load) {
    return load >= kCpuBoundLoad   ? CpuRegime::kBound
           : load >= kCpuTightLoad ? CpuRegime::kTight
                                   : CpuRegime::kRelaxed;
  }
  // cpuLoad() against another cluster CPU per GPU, and this mix with that load.
  double cpuLoadAgainst(double cluster_cpu_per_gpu) const;
  RequestMix withClusterCpuPerGpu(double cluster_cpu_per_gpu) const;
  // From this load CPU runs out about when GPUs do, and CPU-only pods follow the CPU-tight rules.
  static constexpr double kCpuTightLoad = 0.9;
  // Where the exact fragmentation change starts to place better than the CPU-tight rules
  // (figures: docs/placement-quality.md#the-troupe-policys-constants).
  static constexpr double kCpuBoundLoad = 1.06;

 private:
  // cpu_load_ and gpu_pods_cpu_load_ against the cluster's CPU per GPU (0: unknown).
  void setLoads(double cluster_cpu_per_gpu);
  // Fills waste_ from entries_.
  void setWaste();

  std::vector<TypicalRequest> entries_;
  std::vector<ConstrainedShare> constrained_;
  double sharing_share_ = 0.0;
  double whole_node_share_ = 0.0;
  std::vector<WholeNodeDemand> whole_node_demand_;
  double cpu_per_gpu_ = 0.0;
  double cpu_load_ = 0.0;
  double gpu_pods_cpu_per_gpu_ = 0.0;
  double gpu_pods_cpu_load_ = 0.0;
  std::vector<double> waste_;  // fragmentWaste by free milli, 0..kMilliPerGpu
};

// The live path's view of "recent": the last `capacity` requests recorded (the pods filter saw
// and, in Kubernetes mode, the pods the watch sees bound without filter), turned into a mix
// every `refresh` requests. Thread-safe; has its own lock.
class RequestMixWindow {
 public:
  // `remembered_uids`: how many recorded pod uids record(request, uid) remembers to count each
  // pod once, oldest forgotten first; 0 = 4 x capacity.
  explicit RequestMixWindow(size_t capacity = 20000, size_t refresh = 500, size_t remembered_uids = 0);
  void record(const GpuRequest& request);
  // Records the pod's request unless its uid was recorded recently (among the last
  // `remembered_uids`); false when it was. A pod without uid is recorded, as by record(request).
  bool record(const GpuRequest& request, const std::string& uid);
  // Whether record(request, uid) would skip this uid now: a cheap check that spares callers
  // decoding a request the window already counted (every watch event of a bound pod).
  bool remembers(const std::string& uid) const;
  // Rebuilds the mix from the window now (e.g. after filling it from history).
  void refresh();
  // The cluster's GPU nodes' milli-CPU per milli-GPU, for RequestMix::cpuLoad(). A change that
  // moves the mix to another CPU regime (cpuTight, cpuBound) replaces the current mix at once (a
  // new mix, so memoised scores go).
  void setClusterCpuPerGpu(double cpu_per_gpu);
  // The current mix; RequestMix::defaults() until the first refresh.
  std::shared_ptr<const RequestMix> current() const;

 private:
  void rebuildLocked();

  void recordLocked(const GpuRequest& request);

  const size_t capacity_;
  const size_t refresh_;
  const size_t remembered_uids_;
  mutable std::mutex mu_;
  std::deque<GpuRequest> window_;
  // The uids recorded lately, as hashes (a collision skips one request, harmlessly), in the
  // order recorded so the oldest go first.
  std::unordered_set<uint64_t> uids_;
  std::deque<uint64_t> uid_order_;
  size_t since_refresh_ = 0;
  double cluster_cpu_per_gpu_ = 0.0;
  std::shared_ptr<const RequestMix> mix_;
};

}  // namespace troupe::sched
