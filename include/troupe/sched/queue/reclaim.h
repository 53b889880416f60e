// Reclaim: giving a queue back its guaranteed GPUs. When a queue holds less than it is
// guaranteed and has pending pods (or gangs) that fit nowhere, one round plans for the queue's
// whole debt (its pending demand up to its guarantee), not for one pod, and picks pods to evict
// from queues above their fair share:
//   - only pods of preemptible queues, running at least the minimum runtime;
//   - a victim's queue keeps at least its own guaranteed share after the eviction;
//   - a gang is a victim whole (all its bound members, on every node) or not at all;
//   - the cheapest set first: fewest GPUs, then lowest priority, then the most recently started;
//   - only as much as lets the waiting pods (every member of a waiting gang) fit, checked on a
//     copy of the nodes with the victims removed and the waiting pods placed one after another,
//     so the evictions make room where it is needed and no GPU is counted for two pods.
// Pure: the adapter performs the evictions (Eviction API, so PodDisruptionBudgets are honoured)
// and the Scheduler keeps the plan in flight until the victims are gone or its deadline passes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/queue/queue_book.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

struct ReclaimVictim {
  std::string uid;
  std::string key;  // namespace/name
  std::string queue;
  std::string gang;  // "" = on its own
  std::string node;
  int64_t milli = 0;
  int64_t priority = 0;
};

// A waiting pod, or a waiting gang's pending members, that a round makes room for.
struct ReclaimServed {
  std::string key;  // the pod's namespace/name, or the gang key
  bool gang = false;
  int64_t milli = 0;
  std::vector<std::string> uids;   // its pending pods
  std::vector<std::string> nodes;  // where the plan placed each of them (same order as uids)
  bool evicts = false;             // false: it fits in room free already (or freed for another)
};

struct ReclaimPlan {
  std::string queue;    // the queue that gets its guarantee back
  std::string for_key;  // the first pending pod (namespace/name) or gang key the room is for
  // Every waiting pod and gang the round counted, in the order planned; the plan ends (and the
  // victims' nodes stop being held) once these are bound and the victims gone.
  std::vector<ReclaimServed> served;
  int64_t held_milli = 0;              // what the queue held when the round was planned
  std::vector<ReclaimVictim> victims;  // whole gangs only
  int64_t freed_milli = 0;
  // Said on each victim's eviction Event and on the waiting pod: who is evicted for whom, and why.
  std::string reason;
};

// What the planner reads: a snapshot, taken under the Scheduler's locks; it keeps no pointer
// beyond the call.
struct ReclaimInput {
  // Every queue (QueueBook::statuses()): spec (parent, guaranteed, preemptible), allocated and
  // fair share. Invalid ones are ignored; ancestors are followed through spec.parent.
  std::vector<QueueStatus> queues;
  std::vector<QueuedPod> pods;  // pending and bound
  // The GPU nodes as they are now; a victim is taken off a copy of its node, never the node.
  std::vector<const model::NodeState*> nodes;
  // A pending pod's request; unset, or nullopt for a pod: derived from its milli and models
  // (a multiple of 1000: that many whole GPUs, else a share of one GPU).
  std::function<std::optional<GpuRequest>(const QueuedPod&)> request;
  std::vector<std::string> topology_levels;  // for planGang
  QueueClock::time_point now{};
  std::chrono::milliseconds min_runtime{0};
  // Pods not to evict now (their unit, a whole gang included, is left alone): the victims of a
  // plan the adapter could not carry out, e.g. a PodDisruptionBudget refused an eviction.
  std::set<std::string> spared;
};

// The next reclaim round, or nullopt when none is needed or none would make a waiting pod fit.
//
// Waiting queues: valid queues holding less than their guarantee (in all products together:
// guaranteed.milli, else the sum of its per-product amounts), furthest below it first (the
// smallest held fraction, then the larger shortfall, then the name). In each, the waiting pods
// that fit nowhere now, highest priority first, then oldest, then by key; a gang is one
// candidate made of its pending members (priority the highest, age the oldest of them). A
// candidate whose ask would take its queue above its guarantee is not reclaimed for: reclaim
// gives a queue its guarantee, never more.
//
// A round serves one queue: the first waiting queue for which some candidate can be made to fit.
// Its candidates are taken in order while their asks sum to at most the guarantee less what the
// queue holds; each is placed on the round's nodes (copies: victims removed, earlier candidates
// placed) where it fits already, else victims are chosen for it as below, removed, and it is
// placed. A candidate that cannot be made to fit is skipped (the round goes on with the next).
//
// Victims ("units": a pod on its own, or every bound member of a gang) qualify when each
// member's queue is valid, preemptible, above its fair share (allocated_milli >
// fair_share.total_milli), outside the waiting queue's lineage, and the member has run at
// least min_runtime. A unit is added only while its queue and that queue's ancestors (those
// not shared with the waiting queue) keep their guarantee, in all and per product, and while
// each member's queue, less what the round took from it already, is still above its fair share.
//
// Choice: units in cost order (fewest milli-GPUs, then lowest priority, then most recently
// started, then key). A waiting pod: for each node it could use, the units on that node are
// added in that order until the pod fits there; a waiting gang: units from anywhere are added
// until planGang places all its members on the trial nodes. Then each unit, the costliest
// first, is dropped again if the waiting pod (gang) still fits without it, so no unit of a
// plan is removable (minimal; for a gang not always the cheapest set). Of the per-node plans
// the cheapest set wins: fewest milli-GPUs, then the lowest highest priority, then the latest
// earliest start, then fewer pods, then names. Last, each unit of the round, the costliest
// first, is given back when the pods placed on its nodes fit again in the round's remaining
// room (a gang's member only on its own node), so the round frees no unit its debt does not
// need (two 1-GPU pods served one by one take one 2-GPU unit, not two). A waiting pod's
// per-node plans are remembered for the round (per request) and only the nodes the round
// changed are planned again, so a round for hundreds of pods costs little more than one for a
// single pod.
std::optional<ReclaimPlan> planReclaim(const ReclaimInput& input);

}  // namespace troupe::sched
