// The scheduling core behind every adapter: the cluster model plus filter, prioritize,
// reserve (bind) and preempt, in kube-scheduler's vocabulary but free of any wire format.
//
// Thread-safety: every public method may be called from any thread. Reads (filter,
// prioritize) share a lock; writes (node updates, reservations) take it exclusively.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/sched/placement.h"
#include "troupe/sched/pod_request.h"
#include "troupe/sched/policy.h"

namespace troupe::sched {

struct SchedulerConfig {
  PolicyConfig policy;
  size_t max_pending_pods = 100000;  // pods remembered between filter and bind
};

struct FilterResult {
  std::vector<std::string> passed;
  std::map<std::string, std::string> failed;        // preemption may help
  std::map<std::string, std::string> unresolvable;  // it cannot
  // Rejection counts by category, for metrics: "invalid-pod", "unknown-node", "no-gpus",
  // "model", "memory", "count", "topology", "busy".
  std::map<std::string, int> categories;
};

struct HostScore {
  std::string host;
  int64_t score = 0;  // 0..10
};

struct ClusterSummary {
  struct Row {
    std::string product;
    int nodes = 0;
    int gpus = 0;
    int64_t used_milli = 0;
    int shared_gpus = 0;
    int whole_free = 0;
    int nodes_with_free_8 = 0;  // nodes that can still take an 8-GPU pod
  };
  std::vector<Row> by_product;
  int pods = 0;
  int pending = 0;
  // GPUs that are free but sit on nodes with fewer free GPUs than the common request sizes
  // (per product: free GPUs that cannot serve the largest size seen among 1, 2, 4, 8).
  int fragmented_gpus = 0;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config);

  // --- cluster model -------------------------------------------------------------------
  // Adds or replaces a node's facts; allocations on it are kept.
  Status upsertNode(const model::NodeFacts& facts);
  bool removeNode(const std::string& name);
  size_t nodeCount() const;
  // Records a pod's GPUs, e.g. read back from the troupe.dev/gpus annotation.
  Status recordAllocation(const model::Allocation& allocation);
  // Frees whatever the pod holds; false when it held nothing.
  bool release(const std::string& pod_uid);
  std::optional<model::Allocation> allocationOf(const std::string& pod_uid) const;

  // --- extension points ----------------------------------------------------------------
  // Names Troupe does not know are rejected as unresolvable with a reason.
  FilterResult filter(const PodFacts& pod, const std::vector<std::string>& node_names);
  // Learns the nodes first (full-object mode), then filters them by name.
  FilterResult filterNodes(const PodFacts& pod, const std::vector<model::NodeFacts>& nodes,
                           std::vector<std::string>* learn_errors);
  // Integer scores 0..10, one per known candidate. The best node gets 10 alone (ties go to a
  // fixed per-node order) so the choice survives kube-scheduler's random tie-break.
  std::vector<HostScore> prioritize(const PodFacts& pod, const std::vector<std::string>& node_names);
  // Chooses the pod's GPUs on `node` and records them. Idempotent for the same pod and node.
  Result<model::Allocation> reserve(const std::string& pod_uid, const std::string& pod_ns,
                                    const std::string& pod_name, const std::string& node);
  // For each candidate node, keeps the victims only if evicting them lets the pod fit there.
  std::map<std::string, std::vector<std::string>> preempt(
      const PodFacts& pod, const std::map<std::string, std::vector<std::string>>& victims);

  ClusterSummary summary() const;
  const SchedulerConfig& config() const { return config_; }

 private:
  struct Pending {
    GpuRequest request;
    std::string key;
    uint64_t seq = 0;
  };
  void remember(const PodFacts& pod, const GpuRequest& req);
  std::optional<Pending> pendingOf(const std::string& uid) const;

  SchedulerConfig config_;
  model::TopologyCatalog catalog_;

  mutable std::shared_mutex mu_;  // guards nodes_ and pod_node_
  std::unordered_map<std::string, model::NodeState> nodes_;
  std::unordered_map<std::string, std::string> pod_node_;  // pod uid -> node

  mutable std::mutex pending_mu_;  // guards pending_
  std::unordered_map<std::string, Pending> pending_;
  uint64_t pending_seq_ = 0;
};

}  // namespace troupe::sched
