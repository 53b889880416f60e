// Narrowing values shared by nodes in the same scoring state, within one filter call.
//
// The first filter of a new pod shape scores every feasible node: thousands of GPU set
// searches and fragmentation sums. Troupe's and FGD's values read a node only through its GPU
// topology, GPU count, per-GPU use, GPUs held at unknown indices, which typical requests of
// the mix accept its GPU product, and which of the mix's CPU thresholds its free CPU (before
// and after the pod) reaches. Nodes of one profile with the same GPUs in use agree on all of
// these, and a cluster has few such states, so each state is scored once per call and every
// other node in it takes the same value: exactly Policy::rankValue's, not an approximation.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sched/policies/policy_hooks.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

class SharedNodeValues {
 public:
  // The references must outlive this object; the nodes must not change while it is used.
  SharedNodeValues(const Policy& policy, const GpuRequest& req, const ScoreContext& context);

  // policy.rankValue(node, req, context) for a node that fits the pod (findMisfit).
  double value(const model::NodeState& node);

  // How many values were computed (the rest were shared).
  size_t computed() const { return computed_; }

 private:
  // Nodes with more GPUs than this are scored one by one (their use does not fit the key).
  static constexpr int kMaxKeyedGpus = 16;
  using Key = std::array<uint64_t, 8>;
  struct Slot {
    Key key{};
    double value = 0;
    bool used = false;
  };

  // False when the node's state cannot be keyed (too many GPUs).
  bool keyOf(const model::NodeState& node, Key& key);
  // An id shared by the products whose mixAccess (which typical requests accept them) is equal.
  uint64_t accessOf(const std::string& product);
  uint32_t cpuClass(int64_t cpu_left) const;
  void grow();

  const Policy& policy_;
  const PolicyHooks& hooks_;  // hooksOf(policy_)
  const GpuRequest& req_;
  const ScoreContext& context_;
  const bool shareable_;                                       // PolicyHooks::sharesNodeValues
  std::vector<int64_t> cpu_thresholds_;                        // the mix's CPU requests, sorted, distinct
  bool products_matter_ = false;                               // some typical request lists GPU models
  std::vector<std::pair<std::string_view, uint64_t>> access_;  // product -> id in distinct_access_
  std::vector<std::vector<uint64_t>> distinct_access_;         // the mixAccess words of each id
  std::vector<Slot> slots_;                                    // open addressing, a power of two in size
  size_t filled_ = 0;
  size_t computed_ = 0;
};

}  // namespace troupe::sched
