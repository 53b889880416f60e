// The cluster model: every node Troupe knows, by name and by ordinal, and which node each pod's
// GPUs are on. Nodes get small ordinals (reused after removal) that side tables (ScoreMemo, a
// pending pod's passed nodes) index by; a birth count tells a node from a later one that took
// over its ordinal.
//
// Not thread-safe: the Scheduler guards it with its model lock (reads shared, writes exclusive).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/sched/cluster/cluster_summary.h"
#include "troupe/sched/cluster/node_index.h"

namespace troupe::sched {

// Every field of the facts, so that an unchanged node (full-node requests resend every
// candidate) is recognised without rebuilding it. Never 0 (0 means "never built").
uint64_t factsFingerprint(const model::NodeFacts& facts);

// The GPU nodes' allocatable milli-CPU per milli-GPU: CPU-only nodes are left out (GPU pods
// cannot use their CPU), and so are nodes whose CPU is not tracked.
class CpuPerGpu {
 public:
  void add(const model::NodeInfo& node, int sign = +1);
  double value() const;  // 0 without such nodes

 private:
  int64_t cpu_milli_ = 0;
  int64_t gpus_ = 0;
};

class ClusterState {
 public:
  // --- nodes ----------------------------------------------------------------------------
  const model::NodeState* find(const std::string& name) const;
  model::NodeState* find(const std::string& name);
  const NodeIndex& index() const { return index_; }
  // Calls `visit(node)` for each node, in no particular order, until it returns false.
  template <typename Visit>
  void forEachNode(Visit&& visit) const {
    for (const auto& [name, node] : nodes_) {
      if (!visit(node)) return;
    }
  }
  size_t size() const { return nodes_.size(); }
  // CpuPerGpu over the nodes, kept as they come and go.
  double cpuPerGpu() const { return cpu_per_gpu_.value(); }
  // True when the node exists and was last built from facts with this fingerprint.
  bool unchanged(const std::string& name, uint64_t fingerprint) const;
  // Adds the node (with a fresh ordinal and birth) or replaces its info, keeping allocations.
  void upsert(model::NodeInfo info, uint64_t fingerprint);
  // Removes the node and forgets the pods on it; its ordinal is given back. nullopt when the
  // node is unknown, else the ordinal it had.
  std::optional<uint32_t> remove(const std::string& name);
  // Node creations so far; a pending pod remembers it with the nodes its filter passed.
  uint64_t births() const { return births_; }
  // True when `node` already existed when the birth count was `births` (not a later node
  // that reuses an ordinal seen then).
  bool bornBy(const model::NodeState& node, uint64_t births) const;

  // --- pods' GPUs -----------------------------------------------------------------------
  // The node the pod's GPUs are on, or nullptr.
  const std::string* nodeOf(const std::string& pod_uid) const;
  std::optional<model::Allocation> allocationOf(const std::string& pod_uid) const;
  // Why the allocation cannot be recorded as it stands (an unknown node, a pod that already
  // holds GPUs), or OK.
  Status checkRecord(const model::Allocation& allocation) const;
  // Records the pod's allocation on its node: checkRecord, then whether the node can give
  // those GPUs.
  Status record(const model::Allocation& allocation);
  // Frees whatever the pod holds: false when it held nothing (or its node is gone).
  bool release(const std::string& pod_uid);
  // GPUs held on a node for no pod (a gang's plan): an allocation no pod record points at.
  Status hold(const model::Allocation& allocation);
  void unhold(const std::string& node, const std::string& hold_uid);

  // Fills the node rows, per-product rows, pods and fragmented GPUs of `s`.
  void summarize(ClusterSummary& s, size_t max_node_rows) const;

 private:
  std::unordered_map<std::string, model::NodeState> nodes_;
  NodeIndex index_;  // nodes_ by name, for filter and prioritize
  // Node ordinals given back by removed nodes, and the next new one.
  std::vector<uint32_t> free_ordinals_;
  uint32_t next_ordinal_ = 0;
  // When each ordinal's current node was created (a count of node creations), and the count.
  std::vector<uint64_t> ordinal_births_;
  uint64_t births_ = 0;
  std::unordered_map<std::string, std::string> pod_node_;  // pod uid -> node
  CpuPerGpu cpu_per_gpu_;
};

}  // namespace troupe::sched
