// Live defragmentation advice: which running pods to move, and where, so that a pending pod
// (or every member of a pending gang) that fits nowhere now would fit. Unlike the simulator's
// advisor (sim/defrag.h), which lowers the cluster's fragmentation against a typical mix, this
// answers one concrete question for one waiting request, with the fewest moves.
//
// Search, per node X that could ever take the request (model, memory, size) but cannot now:
//   - the movable pods on X: not a gang member, GPU indices known, not pinned (pending or held
//     pods the caller names); at most kMaxPodsPerNode of them, fewest milli-GPUs first;
//   - a quick bound first: X is skipped when its GPUs free or held only by movable pods are
//     fewer than the request needs; the others are searched in order of the fewest moves that
//     could free enough GPUs (largest movable pods first), and the search stops at nodes whose
//     bound exceeds the smallest working set found (or once max_relocations sets of that size
//     are in hand);
//   - subsets of those pods, smallest first (up to max_moves), each tested by taking them off a
//     scratch copy of X: does the request fit there then (findMisfit, placeOnNode)? Sizes past
//     the first feasible one + 1 are not enumerated (only kept as fallbacks for relocation).
// The feasible (X, subset) pairs are ranked by fewer moves, then fewer GPUs moved (milli), then
// the node order of the input, then the pods' uids; the first whose pods can all be placed on
// OTHER nodes wins. Relocation is sequential on copies of the touched nodes: each pod (largest
// first) goes to the fullest node (fewest free milli-GPUs) where it fits now, X and nodes freed
// for the request excluded, so emptier nodes stay free for what waits; among equally full nodes
// the one the policy scores highest (then input order); its GPUs there are the policy's choice. A moved pod
// keeps its GPU product (a running pod's model constraint is unknown), its GPU count and share, CPU and
// memory.
//
// A gang: nodes are freed one at a time (the best freeing each round, on the copies left by
// the rounds before) until planGang places every member on the copies, or max_moves is spent.
//
// Cost: per request O(N) findMisfit for the "fits now" check, O(N * pods) for the bounds and
// an O(N log N) sort of the nodes by bound,
// at most max_checks subset tests in all, and at most max_relocations relocation attempts of
// O(max_moves * N) findMisfit plus a policy score per fitting node. Nothing is allocated per
// node except for the nodes a plan touches. Pure: reads the caller's nodes, never changes them.
#pragma once

#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

// What waits: a pod on its own (members 1) or a gang of `members` pods each asking `request`.
struct DefragAsk {
  std::string key;  // namespace/name, or the gang key: for messages
  GpuRequest request;
  int members = 1;
};

struct DefragInput {
  // The GPU nodes, in a fixed order (by name): ties go to the earlier node.
  std::vector<const model::NodeState*> nodes;
  const Policy* policy = nullptr;
  ScoreContext context;
  // Pods that must stay: pending pods and pods whose hold is not a running pod.
  std::set<std::string> pinned;
  std::vector<std::string> topology_levels;  // for planGang
  int max_moves = 4;
  size_t max_checks = 20000;    // subset tests, over all nodes
  size_t max_relocations = 16;  // (node, subset) candidates whose pods are placed elsewhere
  // The request a running pod would make again; unset: its count, share, CPU and memory, on
  // its node's GPU product, topology preferred.
  std::function<GpuRequest(const model::Allocation&, const model::NodeState& from)> request_of;
};

inline constexpr size_t kMaxPodsPerNode = 24;

struct DefragMove {
  std::string pod_uid;
  std::string pod_key;  // namespace/name
  std::string from, to;
  std::vector<int> gpus;  // what it would take on `to`
  int64_t milli = 0;      // milli-GPUs it holds
};

// One node freed for the request: its moves and what is free there after them.
struct DefragFreed {
  std::string node;
  std::vector<DefragMove> moves;
  int free_gpus_after = 0;  // whole GPUs free on the node once the moves are done
  int connected_after = 0;  // the largest of those inside one NVLink domain
};

struct DefragAdvice {
  enum class Outcome { kPlan, kFitsNow, kNoPlan };
  Outcome outcome = Outcome::kNoPlan;
  std::vector<DefragFreed> freed;  // kPlan: in the order made
  int moves = 0;
  int64_t milli_moved = 0;
  std::string reason;  // kNoPlan: why, with the numbers

  int freedGpus() const;  // sum of free_gpus_after
};

DefragAdvice planDefragAdvice(const DefragAsk& ask, const DefragInput& input);

// "moving pods ns/a, ns/b from node X to nodes Y, Z would free 8 connected GPUs on X" (one
// clause per node freed).
std::string describeDefragAdvice(const DefragAdvice& advice, bool connected);

}  // namespace troupe::sched
