// One pod's filter as an ordered list of small stages over a per-cycle record, in the spirit of
// kube-scheduler's framework (PreFilter computes once into CycleState; Filter and Score read
// it). Each stage reads what the stages before it wrote into FilterCycle, adds its part and
// either lets the cycle go on or ends it with the answer in FilterCycle::out. What the cycle
// decided is kept in the pod's pending record (PendingPods) by recordCycle, so that the verbs
// after filter (prioritize, preempt, bind) read it instead of computing it again.
//
// The stages hold no lock of their own: the Scheduler (the facade) runs the pod stages before
// it takes the model lock and the node stages under it (docs/scheduler-core.md#filter-stages).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/cluster/cluster_state.h"
#include "troupe/sched/filter/filter_result.h"
#include "troupe/sched/filter/pending_pods.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/gang/gang_book.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sched/queue/queue_book.h"
#include "troupe/sched/queue/reclaim_book.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/score/score_memo.h"

namespace troupe::sched {

// The parts of the core the stages read and change, and the settings they follow. The
// Scheduler builds it per cycle from its members; it owns them and their locks.
struct FilterParts {
  const PolicyConfig& policy;
  const std::vector<std::string>& topology_levels;
  std::chrono::milliseconds gang_timeout;
  bool narrow_to_best = false;
  bool remember_scores = true;
  const std::function<std::chrono::steady_clock::time_point()>& clock;  // empty: steady_clock
  PendingPods& pending;
  RequestMixWindow& mix_window;
  QueueBook& queues;
  const ReclaimBook& reclaim;
  const ClusterState& cluster;  // read under the model lock
  GangBook& gangs;              // changed only under the model lock held exclusively
  ScoreMemo& score_memo;

  std::chrono::steady_clock::time_point now() const {
    return clock ? clock() : std::chrono::steady_clock::now();
  }
};

// The per-cycle record: what one filter call knows of its pod so far.
struct FilterCycle {
  FilterCycle(const PodFacts& p, const std::vector<std::string>& names, const PodGroupInfo& group)
      : pod(p), node_names(names), pod_group(group) {}

  // The call.
  const PodFacts& pod;
  const std::vector<std::string>& node_names;
  const PodGroupInfo& pod_group;

  // readPodStage: the request (parsed once per pod change), the gang, and whether Kueue placed it.
  uint64_t fingerprint = 0;
  GpuRequest request;
  std::optional<GangSpec> gang;
  bool kueue_placed = false;  // Kueue's TAS fixed the nodes: Troupe only picks GPUs there
  bool in_gang = false;       // filtered as a gang member (its gang's plan decides)
  // rememberPodStage: the pod's pending record (seq 0: none, the pod has no uid).
  uint64_t seq = 0;
  // queueStage: the pod's queue ("" without queues or for a pod that wants no GPUs).
  std::string queue;
  // Set by the facade for the node stages of a gang member (the model lock held exclusively):
  // binds the gang's planning answers, delivered after the lock is released.
  std::vector<Completion>* completions = nullptr;

  // The answer so far: the node stages narrow out.passed; `passed_nodes` keeps the state of
  // each passed node in step while `nodes_known`.
  FilterResult out;
  std::vector<const model::NodeState*> passed_nodes;
  bool nodes_known = false;
  // chooseGpusStage: the pod's GPUs on the one node left, when it chose them.
  std::optional<ChosenGpus> chosen;

  // Ends the cycle: the pod, not the nodes, is wrong, so every node is unresolvable with
  // `reason`, counted in `category`.
  void refuseAll(const std::string& reason, const std::string& category = "invalid-pod");
};

// A stage: false when it ended the cycle (FilterCycle::out is then the answer).
using FilterStage = bool (*)(FilterCycle& cycle, const FilterParts& parts);

// The last step of every cycle that reached the nodes: notes in the pod's pending record what
// the cycle passed, its queue and its gang's minimum (PendingPods::recordPassed). Under the
// model lock (either mode).
void recordCycle(const FilterCycle& cycle, const FilterParts& parts);

}  // namespace troupe::sched
