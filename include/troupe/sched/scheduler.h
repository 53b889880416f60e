// The scheduling core behind every adapter: the cluster model plus filter, prioritize,
// reserve (bind) and preempt, in kube-scheduler's vocabulary but free of any wire format.
//
// Thread-safety: every public method may be called from any thread. Reads (filter,
// prioritize) share a lock; writes (node updates, reservations) take it exclusively.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/model/topology_levels.h"
#include "troupe/sched/gang.h"
#include "troupe/sched/gang_planner.h"
#include "troupe/sched/node_index.h"
#include "troupe/sched/node_ordinal_set.h"
#include "troupe/sched/node_reasons.h"
#include "troupe/sched/placement.h"
#include "troupe/sched/pod_request.h"
#include "troupe/sched/policy.h"
#include "troupe/sched/request_mix.h"
#include "troupe/sched/score_memo.h"

namespace troupe::sched {

using Clock = std::chrono::steady_clock;

// Learn mode: nodes taken from the bodies of full-node requests (kube-scheduler's
// nodeCacheCapable: false), for a Troupe with neither --cluster nor the Kubernetes API. Off,
// request bodies never add or change a node: the facts come from --cluster or the API only.
// On, what anyone who reaches the verbs sends is believed, so it is bounded: a node not seen
// in a request for `ttl` is forgotten, and at most `max_nodes` are kept (new ones are refused
// with a reason until others expire; the ones kept are never pushed out).
struct NodeLearning {
  bool enabled = true;
  size_t max_nodes = 10000;
  std::chrono::milliseconds ttl{std::chrono::hours(1)};
};

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
  // Gangs: the default bind-barrier wait (troupe.dev/gang-timeout overrides per gang); how
  // long a gang may wait for capacity before the nodes it needs stop taking other pods; how
  // recently a waiting gang must have been seen to keep its place in line.
  std::chrono::milliseconds gang_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds gang_starvation{std::chrono::minutes(2)};
  std::chrono::milliseconds gang_active_window{std::chrono::seconds(60)};
  // The longest bind-barrier wait a pod's troupe.dev/gang-timeout may ask for (longer asks are
  // capped, and the GangPlanned event says so). It must stay below kube-scheduler's extender
  // httpTimeout: a bind released after kube-scheduler gave up on the call binds a pod it
  // already put back in its queue.
  std::chrono::milliseconds gang_max_timeout{std::chrono::minutes(5)};
  // At most this many gangs are tracked; the filter of a pod that would start one more is
  // refused with a reason (a flood of made-up gang names must not grow memory without bound).
  size_t max_gangs = 10000;
  // Uids of pods known to be gone for good (deleted, terminating, finished), so a filter or
  // bind that kube-scheduler sends after the deletion cannot bring them back into a gang.
  size_t max_deleted_pods = 100000;
  std::function<Clock::time_point()> clock;  // injected for tests; steady_clock by default
  // Network topology levels (node label keys, widest first) that gangs are packed into and
  // that troupe.dev/topology-required/-preferred name; empty turns them off.
  std::vector<std::string> topology_levels = model::defaultTopologyLevels();
};

// Called exactly once with the pod's allocation or the reason it was refused; never under
// the Scheduler's locks, possibly on another thread (a gang's last member releases them all).
using BindCallback = std::function<void(Result<model::Allocation>)>;

struct FilterResult {
  std::vector<std::string> passed;  // in request order
  NodeReasons failed;               // preemption may help
  NodeReasons unresolvable;         // it cannot
  // Rejection counts by category, for metrics: "invalid-pod", "unknown-node", "no-gpus",
  // "model", "memory", "count", "topology", "busy", "gang", "drain".
  std::map<std::string, int> categories;
};

// A gang member's progress, for Events on the pod (an adapter posts them).
struct GangNotice {
  enum class Kind {
    kPlanned,   // the gang was planned and this member steered to its node
    kWaiting,   // the member reached the bind barrier; others are still missing
    kTimedOut,  // the barrier timed out; the member's bind failed
    kEnded,     // every member of the gang is gone: whatever was kept for it is released
                // (pod_* are empty; adapters drop their caches for the gang)
  };
  Kind kind = Kind::kPlanned;
  std::string pod_uid, pod_ns, pod_name, gang, message;
};
using GangObserver = std::function<void(const GangNotice&)>;
// Reads the PodGroup object a pod's scheduling.x-k8s.io/pod-group label names.
using PodGroupLookup = std::function<PodGroupInfo(const std::string& ns, const std::string& name)>;

// What prioritize says of one candidate node.
struct HostValue {
  std::string host;
  double value = -1;  // the policy's unitScore, 0..1, higher is better; < 0: unknown or not fitting
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
  // One row per GPU node, sorted by name (per-node gauges: bounded by the cluster's size);
  // empty, with node_rows_omitted set, when the GPU nodes outnumber summary()'s max_node_rows.
  struct NodeRow {
    std::string node;
    std::string product;
    int gpus = 0;
    int64_t used_milli = 0;
    int shared_gpus = 0;
  };
  std::vector<NodeRow> by_node;
  bool node_rows_omitted = false;
  struct Gangs {
    int waiting = 0;   // seen, no plan (does not fit, or waits its turn)
    int planned = 0;   // GPUs held, members steered, not all bound yet
    int admitted = 0;  // every minimum member bound
    int held_gpus = 0;
    int draining_nodes = 0;
  } gangs;
  int pods = 0;
  int pending = 0;
  // GPUs that are free but sit on nodes with fewer free GPUs than the common request sizes
  // (per product: free GPUs that cannot serve the largest size seen among 1, 2, 4, 8).
  int fragmented_gpus = 0;
  // narrowTo: best, since the start: node values reused from an earlier filter call
  // (ScoreMemo) and values computed.
  uint64_t scores_remembered = 0;
  uint64_t scores_computed = 0;
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
  // Full-object mode: learns the nodes first (learn mode only, see NodeLearning), then
  // filters them by name. Without learning, the facts in the request are ignored.
  FilterResult filterNodes(const PodFacts& pod, const std::vector<model::NodeFacts>& nodes,
                           std::vector<std::string>* learn_errors);
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
  // Every gang Troupe tracks, for tests and diagnostics (sorted by key).
  struct GangView {
    std::string key;
    uint64_t incarnation = 0;  // 1, 2, ...: a gang re-created under a used name is a new one
    enum class State { kWaiting, kPlanned, kAdmitted, kDormant } state = State::kWaiting;
    int min_member = 0;                       // 0 while no member was filtered (dormant)
    int members = 0;                          // live pods of the gang Troupe knows of
    int bound = 0;                            // of which hold their GPUs (bound, or released by the barrier)
    int held_gpus = 0;                        // GPUs held for its plan
    std::map<std::string, int> held_by_node;  // the same, per node
    int waiting_binds = 0;                    // binds parked at its barrier
    std::vector<std::string> member_uids;     // sorted
    std::vector<std::string> drained_nodes;   // nodes kept free for it now
    std::string last_reason;                  // why it was last refused
  };
  std::vector<GangView> gangs() const;
  // Gang events since the last call, for metrics: seconds from first sight to admission, and
  // the number of barrier timeouts.
  struct GangEvents {
    std::vector<double> admit_seconds;
    int timeouts = 0;
  };
  GangEvents drainGangEvents();

  // Adapter hooks, called from any thread and never under the Scheduler's locks; set them
  // before serving. The observer must not call back into the Scheduler.
  void setGangObserver(GangObserver observer);
  void setPodGroupLookup(PodGroupLookup lookup);

  // For each candidate node, keeps the victims only if evicting them lets the pod fit there.
  std::map<std::string, std::vector<std::string>> preempt(
      const PodFacts& pod, const std::map<std::string, std::vector<std::string>>& victims);

  // by_node is filled only while the GPU nodes number at most max_node_rows: a caller that
  // exports no per-node series at 10,000 nodes does not pay for 10,000 sorted rows.
  ClusterSummary summary(size_t max_node_rows = std::numeric_limits<size_t>::max()) const;
  const SchedulerConfig& config() const { return config_; }

 private:
  struct Pending {
    GpuRequest request;
    std::string key;
    uint64_t seq = 0;
    std::string gang;  // gang key, "" for a pod on its own
    // The nodes the pod's latest filter passed, by ordinal, and how many nodes had been
    // created by then (a node created later may reuse a passed ordinal, and is not passed).
    bool filtered = false;  // false: only prioritize has seen it
    NodeOrdinalSet passed;
    uint64_t births = 0;
  };
  struct Waiter {
    std::string uid, key, node;
    BindCallback done;
  };
  // One incarnation of a gang (docs/gang-lifecycle.md). It begins when a member is first seen
  // (filtered, or bound as the API shows) and ends when every member is gone; pods that later
  // carry the same name form the next incarnation. Members are live pods only.
  struct Gang {
    GangSpec spec;
    bool filtered = false;  // a member passed through filter: spec and request are known.
                            // Before that the gang is dormant: bound members read from the
                            // API (e.g. after a restart), not counted, never planned.
    GpuRequest request;
    uint64_t incarnation = 0;  // also the gang's place in line among equal priorities
    int64_t priority = 0;
    Clock::time_point first_seen, last_seen, barrier_deadline;
    std::vector<GangSlot> slots;                    // the plan not yet released; empty = none
    std::vector<Waiter> waiting;                    // binds held at the barrier
    std::vector<std::string> drain_nodes;           // nodes kept free for it after gang_starvation
    std::vector<std::string> candidates;            // the nodes its members were last offered
    std::unordered_map<std::string, bool> members;  // live member uid -> holds its GPUs (bound)
    int bound = 0;                                  // members holding their GPUs
    std::string last_reason;

    // Every minimum member holds its GPUs: further members are placed like single pods.
    bool admitted() const { return filtered && bound >= spec.min_member; }
    // A member is still to be placed: only then does the gang stand in line, hold or drain.
    bool pending() const { return static_cast<int>(members.size()) > bound; }
  };
  using Completion = std::pair<BindCallback, Result<model::Allocation>>;

  // Records the pod as pending. kFirst: its first filter since it arrived; kDeleted: the pod is
  // gone for good (forgetPod) and nothing was recorded. `seq`: the record's sequence number, for
  // recordPassedLocked.
  enum class Seen { kFirst, kAgain, kDeleted };
  Seen remember(const PodFacts& pod, const GpuRequest& req, const std::string& gang = "",
                uint64_t* seq = nullptr);
  // Notes what the filter passed in the pod's record, unless a later filter replaced it;
  // caller holds mu_ (either mode). `nodes` may be given for `passed`, in order.
  void recordPassedLocked(const std::string& uid, uint64_t seq, const std::vector<std::string>& passed,
                          const std::vector<const model::NodeState*>* nodes = nullptr);
  // OK when `node` passed the pod's latest filter; caller holds mu_.
  Status checkFilteredLocked(const std::string& pod_uid, const std::string& key,
                             const std::string& node) const;
  std::optional<Pending> pendingOf(const std::string& uid) const;
  Clock::time_point now() const;
  Result<model::Allocation> reserveLocked(const std::string& pod_uid, const std::string& key,
                                          const std::string& node, const GpuRequest& req);

  // Filter for a pod on its own (or a member of an admitted gang); caller holds mu_. With
  // `passed_nodes`, also the NodeState of each passing node, in `passed` order.
  FilterResult filterSingleLocked(const GpuRequest& req, const std::vector<std::string>& node_names,
                                  const std::string& own_gang = "",
                                  std::vector<const model::NodeState*>* passed_nodes = nullptr) const;
  // narrow_to_best: keeps only the best of `out.passed` (`nodes`: their states) and returns its
  // index in `nodes`; caller holds mu_.
  int narrowLocked(const GpuRequest& req, const std::vector<const model::NodeState*>& nodes,
                   FilterResult& out) const;
  // Gang internals; the caller holds mu_ exclusively.
  FilterResult filterGangLocked(const PodFacts& pod, const GpuRequest& req, const GangSpec& spec,
                                const std::vector<std::string>& node_names, std::vector<Completion>* out);
  // The gang `pod` belongs to, created (and joined) if need be; nullptr with *refused set when
  // a new gang would exceed max_gangs.
  Gang* gangFor(const PodFacts& pod, const GpuRequest& req, const GangSpec& spec, std::string* refused,
                std::vector<Completion>* out);
  // Makes `uid` a member of gang `key` (created dormant if it does not exist); leaves the gang
  // it was in before, if another.
  Gang& joinLocked(const std::string& uid, const std::string& key, std::vector<Completion>* out);
  // `uid` is no longer a member: its parked bind fails with `why`, its unbound slot is free
  // again, and a gang left empty ends.
  void leaveLocked(const std::string& uid, const std::string& why, std::vector<Completion>* out);
  // Records whether a member holds its GPUs; one that gave them back may leave its gang's plan
  // short of the minimum (then released, its parked binds failing into `out`).
  void setBoundLocked(const std::string& uid, bool bound, std::vector<Completion>* out);
  void checkPlanLocked(Gang& gang, std::vector<Completion>* out);
  // Ends the gang: releases its plan and drains and erases it; its members (if any) are
  // forgotten as members. Returns the next iterator of gangs_.
  std::map<std::string, Gang>::iterator endGangLocked(std::map<std::string, Gang>::iterator it,
                                                      std::vector<Completion>* out);
  bool planLocked(Gang& gang, const std::vector<std::string>& candidates, std::string* reason, bool* never,
                  std::vector<Completion>* out);
  // Gives the plan's held GPUs back; binds parked for it fail with `why`.
  void releasePlanLocked(Gang& gang, const std::string& why, std::vector<Completion>* out);
  void setDrainLocked(Gang& gang, std::vector<std::string> nodes);
  bool aheadOf(const Gang& a, const Gang& b) const;
  bool activeLocked(const Gang& g) const;                 // a member was filtered within gang_active_window
  std::string drainOwner(const std::string& node) const;  // caller holds mu_ (any mode)
  void expireLocked(std::vector<Completion>* out);
  bool deletedPod(const std::string& uid) const;  // caller holds pending_mu_
  // Delivers notices gathered under mu_ and runs completions; never under a lock.
  void deliver(std::vector<GangNotice> notices, std::vector<Completion> completions) const;

  PodGroupInfo podGroupOf(const PodFacts& pod) const;
  void notify(const std::vector<GangNotice>& notices) const;
  void noticeLocked(GangNotice::Kind kind, const std::string& uid, const std::string& key,
                    const std::string& gang, std::string message);

  mutable std::mutex hooks_mu_;  // guards the two hooks
  GangObserver gang_observer_;
  PodGroupLookup pod_group_lookup_;
  std::vector<GangNotice> notices_;  // guarded by mu_; delivered once it is released

  std::map<std::string, Gang> gangs_;                         // guarded by mu_
  std::unordered_map<std::string, std::string> member_gang_;  // member uid -> gang key; mu_
  std::unordered_map<std::string, std::string> drained_;      // node -> gang keeping it free; mu_
  uint64_t gang_incarnations_ = 0;                            // guarded by mu_
  GangEvents gang_events_;                                    // guarded by mu_

  SchedulerConfig config_;
  model::TopologyCatalog catalog_;

  mutable std::shared_mutex mu_;  // guards nodes_ and pod_node_
  std::unordered_map<std::string, model::NodeState> nodes_;
  NodeIndex index_;  // nodes_ by name, for filter and prioritize; guarded by mu_
  // Node ordinals (ScoreMemo's index) given back by removed nodes, and the next new one;
  // guarded by mu_.
  std::vector<uint32_t> free_ordinals_;
  uint32_t next_ordinal_ = 0;
  // When each ordinal's current node was created (a count of node creations), and the count;
  // guarded by mu_.
  std::vector<uint64_t> ordinal_births_;
  uint64_t births_ = 0;
  mutable ScoreMemo score_memo_;                           // narrowing values; has its own lock
  std::unordered_map<std::string, std::string> pod_node_;  // pod uid -> node

  mutable std::mutex pending_mu_;  // guards pending_ and the deleted pods
  std::unordered_map<std::string, Pending> pending_;
  uint64_t pending_seq_ = 0;
  std::unordered_set<std::string> deleted_;  // uids gone for good; bounded, oldest first out
  std::deque<std::string> deleted_order_;

  // Learn mode: learned node -> when a request last carried it (own lock; taken before mu_).
  mutable std::mutex learn_mu_;
  std::unordered_map<std::string, Clock::time_point> learned_;
  Clock::time_point next_expiry_{};

  // The requests filter saw recently (own lock): the mix fgd and troupe measure fragmentation
  // against in prioritize.
  RequestMixWindow mix_window_;
};

}  // namespace troupe::sched
