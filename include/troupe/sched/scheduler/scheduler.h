// The scheduling core behind every adapter: filter, prioritize, reserve (bind) and preempt, in
// kube-scheduler's vocabulary but free of any wire format. A facade: it owns the locking and
// delegates to its parts, each with one job: the cluster model (ClusterState), pods between
// filter and bind (PendingPods), gangs (GangBook), learn mode (NodeLearner), the request mix
// (RequestMixWindow), the filter's stages over a per-cycle record (filter_cycle.h) and
// narrowing's memo (ScoreMemo).
//
// Thread-safety: every public method may be called from any thread. Reads (filter,
// prioritize) share the model lock; writes (node updates, reservations, gangs) take it
// exclusively. PendingPods, NodeLearner, RequestMixWindow and ScoreMemo lock themselves.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/model/topology_levels.h"
#include "troupe/sched/cluster/cluster_state.h"
#include "troupe/sched/cluster/cluster_summary.h"
#include "troupe/sched/cluster/node_learner.h"
#include "troupe/sched/defrag/defrag_advice.h"
#include "troupe/sched/filter/filter_result.h"
#include "troupe/sched/filter/pending_pods.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/gang/gang_book.h"
#include "troupe/sched/gang/gang_settings.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sched/queue/queue_book.h"
#include "troupe/sched/queue/reclaim.h"
#include "troupe/sched/queue/reclaim_book.h"
#include "troupe/sched/queue/reclaim_settings.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/scheduler/wake_planner.h"
#include "troupe/sched/score/model_pressure.h"
#include "troupe/sched/score/placement.h"
#include "troupe/sched/score/score_memo.h"

namespace troupe::sched {

using Clock = std::chrono::steady_clock;

struct SchedulerConfig {
  PolicyConfig policy;
  size_t max_pending_pods = 100000;  // pods remembered between filter and bind
  NodeLearning learning;
  // Filter passes only the policy's best node (bestByValue); the other fitting nodes are left
  // out of the answer (neither passed nor failed). kube-scheduler takes a lone feasible node
  // without scoring, so Troupe's choice is not diluted by the 0..10 extender scale, its weight
  // or the in-tree scores.
  bool narrow_to_best = false;
  // Narrowing reuses a node's value while the node, the request and the mix are unchanged
  // (ScoreMemo); off only to measure scoring from scratch.
  bool remember_scores = true;
  // Gangs (the config file's gang section): the default and longest bind-barrier wait and how
  // many gangs are tracked at once.
  GangSettings gang;
  // How long a gang may wait for capacity before the nodes it needs stop taking other pods; how
  // recently a waiting gang must have been seen to keep its place in line.
  std::chrono::milliseconds gang_starvation{std::chrono::minutes(2)};
  std::chrono::milliseconds gang_active_window{std::chrono::seconds(60)};
  // Uids of pods known to be gone for good (deleted, terminating, finished), so a filter or
  // bind that kube-scheduler sends after the deletion cannot bring them back into a gang.
  size_t max_deleted_pods = 100000;
  std::function<Clock::time_point()> clock;  // injected for tests; steady_clock by default
  // Network topology levels (node label keys, widest first) that gangs are packed into and
  // that troupe.dev/topology-required/-preferred name; empty turns them off.
  std::vector<std::string> topology_levels = model::defaultTopologyLevels();
  // Queues (queue_book.h, reclaim.h): when a pod may be reclaimed, when a reclaim in flight is
  // given up, and whether reclaim plans evictions at all (the config file's queues section).
  ReclaimSettings reclaim;
  // How often tick() recomputes fair shares and which queues' pending pods fit. Short, because
  // kube-scheduler binds a burst of pods in a second or two: shares computed before the burst's
  // demand was seen would let the first queue to arrive take more than its share.
  std::chrono::milliseconds queue_refresh{200};
  // The request mix (RequestMixWindow): how many recent requests it holds, and how many new
  // ones rebuild it.
  size_t request_mix_window = 20000;
  size_t request_mix_refresh = 500;
};

// What prioritize says of one candidate node.
struct HostValue {
  std::string host;
  double value = -1;  // the policy's unitScore, 0..1, higher is better; < 0: unknown or not fitting
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
  // Whether `node` is known and has GPUs.
  bool isGpuNode(const std::string& node) const;

  // --- extension points ----------------------------------------------------------------
  // Names Troupe does not know are rejected as unresolvable with a reason. `pod_group` is
  // what the adapter read of the pod's PodGroup (podGroupFor), before calling: the core
  // never waits on the API.
  FilterResult filter(const PodFacts& pod, const std::vector<std::string>& node_names,
                      const PodGroupInfo& pod_group = podGroupsUnread());
  // Full-object mode: learns the nodes first (learn mode only, see NodeLearning), then
  // filters them by name. Without learning, the facts in the request are ignored.
  FilterResult filterNodes(const PodFacts& pod, const std::vector<model::NodeFacts>& nodes,
                           std::vector<std::string>* learn_errors,
                           const PodGroupInfo& pod_group = podGroupsUnread());
  // Learn mode: adds or updates the nodes of a request and forgets those not seen for the
  // TTL. Returns the nodes not learned, with the reason; `learn_errors` gets what to log
  // (one line for all refusals of one call). Without learning: nothing, and no change.
  std::vector<std::pair<std::string, std::string>> learnNodes(const std::vector<model::NodeFacts>& nodes,
                                                              std::vector<std::string>* learn_errors);
  // Learn mode: forgets the learned nodes not seen in a request for the TTL now (learnNodes
  // also does, at most once a second). Returns how many were forgotten.
  size_t expireLearnedNodes();
  size_t learnedNodeCount() const;
  // One value per candidate, in order: the policy's unitScore for the GPUs Troupe would choose
  // there. A planned gang member's slot node is 1 and every other node is not fitting. The
  // extender protocol's 0..10 is the HTTP adapter's mapping (adapters/http/extender_scores.h).
  std::vector<HostValue> prioritize(const PodFacts& pod, const std::vector<std::string>& node_names);
  // Chooses the pod's GPUs on `node` and records them. Idempotent for the same pod and node.
  // Only onto a node that passed the pod's latest filter (and exists as it did then): anything
  // else is refused with a reason, so a bind cannot place a pod Troupe never checked there.
  Result<model::Allocation> reserve(const std::string& pod_uid, const std::string& pod_ns,
                                    const std::string& pod_name, const std::string& node);
  // Binds a pod: a gang member waits at the gang's barrier until its minimum members have all
  // arrived (then all are reserved together) or the gang timeout passes (then all fail and the
  // gang's GPUs are released); any other pod is reserved at once.
  void bind(const std::string& pod_uid, const std::string& pod_ns, const std::string& pod_name,
            const std::string& node, BindCallback done);
  // Expires gang barriers and plans nobody claims; call it every ~100 ms.
  void tick();
  // The pod is gone for good (deleted, terminating or finished; its uid never comes back):
  // its pending record is dropped and it leaves its gang at once (a bind it has parked at the
  // barrier fails; a slot it claimed goes to the next member). A gang left with no member ends:
  // its plan, held GPUs, place in line and drained nodes are released, and pods that later
  // carry its name form a new gang. Later filters and binds of the uid are refused. GPUs the
  // pod holds are released separately (release()), when it no longer holds them.
  void forgetPod(const std::string& pod_uid);
  // A gang's PodGroup object changed its minimum (elastic gangs; the adapter watches PodGroups):
  // GangBook::setMinimum. `gang` is the PodGroup's namespace/name; `native`: scheduling.k8s.io,
  // else scheduler-plugins'. The waker then judges the gang's refused members by the new minimum.
  void setGangMinimum(const std::string& gang, int min_member, bool native);
  // Every gang Troupe tracks, for tests and diagnostics (sorted by key).
  using GangView = sched::GangView;
  std::vector<GangView> gangs() const;
  using GangEvents = sched::GangEvents;
  GangEvents drainGangEvents();

  // Adapter hook, called from any thread and never under the Scheduler's locks; set it
  // before serving. The observer must not call back into the Scheduler.
  void setGangObserver(GangObserver observer);

  // For each candidate node, keeps the victims only if evicting them lets the pod fit there.
  // A victim's gang goes whole: its mates on the node join the victims, and a node is left out
  // when the gang also runs elsewhere. With queues, also the rules of docs/queues.md#preemption.
  std::map<std::string, std::vector<std::string>> preempt(
      const PodFacts& pod, const std::map<std::string, std::vector<std::string>>& victims);

  // --- queues (queue_book.h, reclaim.h) ----------------------------------------------------
  // Replaces the queues; an empty tree turns queueing off (every pod admitted as before).
  void setQueues(QueueTree tree);
  // A Namespace's troupe.dev/default-queue annotation ("" when it has none).
  void setNamespaceQueue(const std::string& ns, const std::string& queue);
  // A GPU pod as the adapter sees it, pending or bound: it joins its queue's accounting
  // (forgetPod and release take it out again). `since`: when it was created (pending) or
  // started (bound), for the minimum runtime. Filter and reserve note the pods they see too.
  // `parsed`: the pod's request as the caller already parsed it (nullopt inside: it does not
  // parse), so a watch event parses it once; nullptr: parsed here.
  void notePod(const PodFacts& pod, QueueClock::time_point since,
               const std::optional<GpuRequest>* parsed = nullptr);
  // A pod the adapter's watch sees bound to a GPU node the model knows (not finished, not
  // deleted): its request joins the request mix unless filter (or an earlier call) already
  // counted it, so pods placed by other schedulers, and those bound before Troupe started, are
  // part of the typical requests too. A pod whose request does not parse is left out.
  // `parsed`: as for notePod.
  void noteWatchedDemand(const PodFacts& pod, const std::optional<GpuRequest>* parsed = nullptr);
  // The request mix fragmentation is measured against now (RequestMixWindow::current).
  std::shared_ptr<const RequestMix> requestMix() const { return mix_window_.current(); }
  std::vector<QueueStatus> queueStatuses() const;
  // The next reclaim to perform, or nullopt (none needed, reclaim off, or one in flight until
  // its victims are gone or reclaim.timeout passes).
  std::optional<ReclaimPlan> planReclaim();
  // What the adapter did with a plan: `evicted` false (e.g. a PodDisruptionBudget refused a
  // member's eviction in the dry run) ends it at once and spares its victims for a
  // reclaim.timeout, so the next plan picks other pods; `why` is counted and logged.
  void reclaimFinished(const ReclaimPlan& plan, bool evicted, const std::string& why);

  // --- waking pending pods (wake_planner.h) -------------------------------------------------
  // The pods Troupe's latest filter refused, still pending, that would pass it now, as
  // `planner` chooses them (in order, each charged against the room the ones before it take,
  // a gang whole, with backoff). Checked against every known node, under the model lock (shared).
  std::vector<WakeCandidate> planWakes(WakePlanner& planner);

  // --- defragmentation advice (defrag_advice.h) --------------------------------------------
  // The fewest moves of running pods after which `ask` would fit, planned on the GPU nodes as
  // they are now (under the model lock, on copies). `pinned` pods stay: the caller names the
  // unbound ones (a hold between filter and bind is not a running pod). A gang that holds a
  // plan or is admitted waits for nothing: kFitsNow.
  DefragAdvice adviseDefrag(const DefragAsk& ask, std::set<std::string> pinned, int max_moves) const;

  // by_node is filled only while the GPU nodes number at most max_node_rows: a caller that
  // exports no per-node series at 10,000 nodes does not pay for 10,000 sorted rows.
  ClusterSummary summary(size_t max_node_rows = std::numeric_limits<size_t>::max()) const;
  const SchedulerConfig& config() const { return config_; }

 private:
  Clock::time_point now() const;
  // OK when `node` passed the pod's latest filter; caller holds mu_.
  Status checkFilteredLocked(const std::string& pod_uid, const std::string& key,
                             const std::string& node) const;
  // A bind of a pod that already holds GPUs: the same allocation for a retry onto the same
  // node, else the refusal; nullopt when it holds none. Caller holds mu_.
  std::optional<Result<model::Allocation>> heldLocked(const std::string& pod_uid, const std::string& key,
                                                      const std::string& node) const;
  // Caller holds mu_ exclusively. `pending`: the pod's record (its request, and the GPUs its
  // filter chose); `gang`: the admitted gang the pod binds into, if any.
  Result<model::Allocation> reserveLocked(const std::string& pod_uid, const std::string& key,
                                          const std::string& node, const PendingPod& pending,
                                          const std::string& gang = "");

  // Runs `change` under mu_ (exclusive) with a list for the binds it answers, then delivers
  // those and the gang notices it queued, outside the lock.
  template <typename Change>
  auto withGangs(Change change);
  // Delivers notices gathered under mu_ and runs completions; never under a lock.
  void deliver(std::vector<GangNotice> notices, std::vector<Completion> completions) const;

  // The book's bound pods after binds answered under mu_ (exclusive): a gang's barrier
  // releases every member at once.
  void markBoundLocked(const std::vector<Completion>& completions);
  // Extends `victims` on `node` to the other members of their gangs bound there; false when a
  // victim's gang also has members bound on other nodes (a gang is evicted whole or not at
  // all). Caller holds mu_.
  bool wholeGangsLocked(const model::NodeState& node, std::vector<std::string>& victims) const;
  // Fair shares and which queues' pending pods fit, at most once per queue_refresh unless `force`.
  void refreshQueues(bool force);

  const SchedulerConfig config_;
  model::TopologyCatalog catalog_;  // own lock

  mutable std::mutex hooks_mu_;  // guards the observer
  GangObserver gang_observer_;

  // The model lock: guards cluster_ and gangs_ (reads shared, changes exclusive).
  mutable std::shared_mutex mu_;
  ClusterState cluster_;
  GangBook gangs_;
  mutable ScoreMemo score_memo_;  // narrowing values; has its own lock

  QueueBook queues_;     // own lock; taken inside mu_, never around it
  ReclaimBook reclaim_;  // the reclaim in flight; own lock, taken inside mu_, never around it
  mutable std::mutex queue_refresh_mu_;
  Clock::time_point queues_refreshed_{};

  PendingPods pending_;  // own lock
  NodeLearner learner_;  // own lock; taken before mu_, never inside it
  // The requests seen recently (own lock): each pod filter saw, and each pod the watch saw
  // bound (noteWatchedDemand), once; the mix fgd and troupe measure fragmentation against.
  RequestMixWindow mix_window_;
};

}  // namespace troupe::sched
