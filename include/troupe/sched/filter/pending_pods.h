// Pods between filter and bind: what each pod's latest filter asked for and passed, so that a
// bind goes only onto a node Troupe checked and reuses the parsed request; and the uids of
// pods gone for good (tombstones), so kube-scheduler's late calls cannot bring them back.
// Both are bounded: the oldest pending pods and tombstones go first.
//
// Thread-safe: its own lock, never held while calling out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "troupe/sched/cluster/node_ordinal_set.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/score/placement.h"

namespace troupe::sched {

// What a pod's request was parsed from (labels, annotations, containers, priority), so that an
// unchanged pod is not parsed again by a later verb of the same cycle.
uint64_t podFingerprint(const PodFacts& pod);

// The GPUs a filter chose for the pod on the one node it passed (filter_stage_gpus.h), and
// what they were chosen from: the node (ordinal) as it was (NodeState::changes) and the mix. A
// bind onto that node while both are unchanged takes these GPUs instead of choosing again.
struct ChosenGpus {
  uint32_t ordinal = 0;
  uint64_t changes = 0;
  std::shared_ptr<const RequestMix> mix;  // nullptr unless the request is a share
  Placement placement;
};

struct PendingPod {
  GpuRequest request;
  uint64_t fingerprint = 0;  // podFingerprint of the pod `request` was parsed from
  std::string key;
  uint64_t seq = 0;
  std::string gang;  // gang key, "" for a pod on its own
  // The nodes the pod's latest filter passed, by ordinal, and how many nodes had been
  // created by then (a node created later may reuse a passed ordinal, and is not passed).
  bool filtered = false;  // false: only prioritize has seen it
  NodeOrdinalSet passed;
  uint64_t births = 0;
  // What the pod waker needs (wake_planner.h): the queue its latest filter charged ("" without
  // queues), the gang's minimum members then, and its priority.
  std::string queue;
  int gang_min = 0;
  int64_t priority = 0;
  // The pod's queue as its latest filter resolved it (queueStage), for the verbs after filter;
  // nullopt when that filter resolved none (queues off, no GPUs, or not reached).
  std::optional<std::string> resolved_queue;
  std::optional<ChosenGpus> chosen;  // the GPUs the latest filter chose, if it chose any
  bool refused() const { return filtered && passed.size() == 0; }
};

class PendingPods {
 public:
  PendingPods(size_t max_pending, size_t max_deleted)
      : max_pending_(max_pending), max_deleted_(max_deleted) {}

  // Records the pod as pending (a pod without uid is not recorded). kFirst: its first record
  // since it arrived; kDeleted: the pod is gone for good and nothing was recorded. `seq`: the
  // record's sequence number, for recordPassed.
  enum class Seen { kFirst, kAgain, kDeleted };
  Seen remember(const PodFacts& pod, const GpuRequest& req, uint64_t fingerprint,
                const std::string& gang = "", uint64_t* seq = nullptr);
  // Notes what the filter passed in the pod's record, unless a later filter replaced it.
  void recordPassed(const std::string& uid, uint64_t seq, NodeOrdinalSet passed, uint64_t births,
                    const std::string& queue = "", int gang_min = 0,
                    std::optional<ChosenGpus> chosen = std::nullopt);
  // Notes the queue the filter resolved for the pod (PendingPod::resolved_queue), unless a
  // later filter replaced the record.
  void noteQueue(const std::string& uid, uint64_t seq, const std::string& queue);
  std::optional<PendingPod> find(const std::string& uid) const;
  // Every pod whose latest filter passed no node (PendingPod::refused), as uid and record.
  std::vector<std::pair<std::string, PendingPod>> refused() const;
  // The request recorded for the pod while it is unchanged (parsed from a pod with this
  // podFingerprint), else nullopt.
  std::optional<GpuRequest> request(const std::string& uid, uint64_t fingerprint) const;
  // The pod is gone for good: its record is dropped and its uid refused from now on.
  void forget(const std::string& uid);
  bool deleted(const std::string& uid) const;
  size_t size() const;

 private:
  const size_t max_pending_;
  const size_t max_deleted_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, PendingPod> pending_;
  uint64_t seq_ = 0;
  std::unordered_set<std::string> deleted_;  // uids gone for good; bounded, oldest first out
  std::deque<std::string> deleted_order_;
};

}  // namespace troupe::sched
