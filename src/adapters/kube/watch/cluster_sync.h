// Keeps the scheduling core in step with the cluster: Node and Pod watch events become
// upsertNode/removeNode and recordAllocation/release calls.
//
// GPU accounting follows the truth in the API:
//   - every bound pod that holds GPUs (nvidia.com/gpu or troupe.dev/gpu-milli; phase not
//     Succeeded/Failed; until it is deleted) counts against its node, with its CPU and memory
//     requests; so does every bound CPU-only pod on a GPU node, whoever bound it: the CPU left
//     beside the GPUs decides what fits there and how the policies score the node (not on
//     DRA-served nodes, nor pods with ResourceClaims: the DRA ledger counts those);
//   - its GPU indices come from the troupe.dev/gpus annotation Troupe wrote when it bound the
//     pod; a pod bound by anyone else (or whose annotation is unusable, or would overlap
//     another pod's GPUs) counts as holding that many GPUs whose indices are unknown, so they
//     are never handed out twice;
//   - unbound pods are left alone: a reservation Troupe's binder holds for one stays its own
//     business until the pod shows up bound (or is deleted);
//   - a pod that finishes or is deleted releases its GPUs;
//   - a pod being deleted (deletionTimestamp) or deleted leaves its gang at once
//     (Scheduler::forgetPod): a gang whose pods are all gone ends and frees what it held;
//   - queues: every unbound GPU pod that is not being deleted, and every bound one that holds
//     GPUs, is noted in its queue's accounting (Scheduler::notePod) with how long it has
//     waited (creationTimestamp) or run (status.startTime), converted to the steady clock;
//     deletion and release take it out again;
//   - a bound gang member is recorded as a member of its gang (troupe.dev/gang or the other
//     gang keys), so after a restart the gang's bound members count towards its minimum and
//     only the unbound ones are planned again.
//   - the request mix: every bound pod (CPU-only ones and those other schedulers placed
//     included) is passed to Scheduler::noteWatchedDemand, which counts each pod on a GPU node
//     once in the mix the troupe policy scores against, unless its filter already did;
//   - DRA (docs/dra.md): on a node DRA serves, what pods hold is the DraSync's business
//     (dra_sync.h): they never go through the per-index path.
// Applying the same state twice is a no-op, so the watch's echo of Troupe's own binding, a
// relist and a binder's confirmation never double-count.
//
// The binder also asks what the watch last showed of an unbound GPU pod (pendingPod): when it
// shows the pod unbound, the binder sends the Binding without reading the pod first.
//
// Memory: only GPU pods, and bound pods on GPU nodes, are kept (bound: node, GPU mask, share,
// CPU, memory, pod key: ~200 bytes each plus the core's own allocation record; unbound:
// namespace, name and scheduler name until bound or deleted); other pods leave nothing here (the core's
// request mix remembers a bounded number of uids). Nodes keep an 8-byte digest of their GPU facts so
// unchanged status updates skip the core.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/dra/dra_sync.h"
#include "adapters/kube/watch/kube_objects.h"
#include "adapters/kube/watch/watch_handler.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::kube {

class ClusterSync {
 public:
  ClusterSync(sched::Scheduler& scheduler, adapters::Logger& logger, DraOptions dra = {});
  ClusterSync(const ClusterSync&) = delete;
  ClusterSync& operator=(const ClusterSync&) = delete;

  WatchHandler& nodeHandler() { return node_handler_; }
  WatchHandler& podHandler() { return pod_handler_; }
  // The DRA half: the ResourceSlice and ResourceClaim watches and what they hold.
  DraSync& dra() { return dra_; }
  WatchHandler& sliceHandler() { return dra_.sliceHandler(); }
  WatchHandler& claimHandler() { return dra_.claimHandler(); }
  // DraSync::claimGpus: what the pod's ResourceClaims ask of the GPU device classes, -1 unknown.
  int claimGpus(const sched::PodFacts& pod) const { return dra_.claimGpus(pod); }
  // Whether DRA chooses the devices on the node.
  bool draServed(const std::string& node) const;

  // A pod as the API shows it now (listed, added, modified, or read back by the binder).
  void applyPod(const PodView& pod);
  // The pod is gone.
  void deletePod(const std::string& uid);
  void applyNode(const model::NodeFacts& facts);
  void deleteNode(const std::string& name);

  // An unbound GPU pod, not being deleted, as the pod watch (or a list) last showed it.
  struct PendingPod {
    std::string ns, name, scheduler_name;
    std::string gang;  // its gang's key ("" on its own)
    // metadata.creationTimestamp, when readable; and its GPU request, when its annotations
    // parse (for the defragmentation advice, which skips pods without one).
    std::optional<std::chrono::system_clock::time_point> created;
    std::optional<sched::GpuRequest> request;
  };
  std::optional<PendingPod> pendingPod(const std::string& uid) const;
  // Unbound GPU pods whose namespace/name or gang key is `key` (a reclaim plan's for_key), at
  // most `limit`, as uid and pod.
  std::vector<std::pair<std::string, PendingPod>> pendingFor(const std::string& key, size_t limit) const;
  // Every unbound GPU pod, as uid and pod, sorted by uid.
  std::vector<std::pair<std::string, PendingPod>> pendingPods() const;

  bool nodesSynced() const { return nodes_synced_.load(); }
  bool podsSynced() const { return pods_synced_.load(); }
  bool synced() const { return nodesSynced() && podsSynced(); }
  // Called once, from the watcher thread that completes the first sync of both resources.
  void onSynced(std::function<void()> callback);
  // Called with a pod's uid whenever the pod watch (or a pod list) shows the pod bound or
  // deleted: the binder's evidence that the watch delivers its bindings. Runs on the pod
  // watcher's thread, under this object's lock: it must not call back into it.
  void onPodWatched(std::function<void(const std::string& uid)> callback);

  struct Stats {
    size_t nodes = 0;
    size_t gpu_pods = 0;      // bound pods holding GPUs
    size_t cpu_pods = 0;      // bound pods on GPU nodes holding only CPU or memory
    size_t unknown_pods = 0;  // of which with unknown indices
    size_t orphan_pods = 0;   // of which on nodes Troupe does not know (yet)
    uint64_t conflicts = 0;   // annotations that could not be honoured
    size_t dra_nodes = 0;     // nodes DRA serves
    size_t dra_holders = 0;   // pods (or unreserved claims) holding GPUs there
    int dra_gpus_held = 0;    // GPUs they hold
  };
  Stats stats() const;

 private:
  struct PodRecord {
    std::string node;
    std::string key;
    std::string gang;       // its gang's key, so a restarted Troupe counts bound members
    uint64_t mask = 0;      // GPU indices when known
    int32_t milli = 1000;   // per GPU
    int16_t unknown = 0;    // GPUs whose indices are unknown
    int64_t cpu_milli = 0;  // its requests, held on the node (CPU-only pods too)
    int64_t memory_bytes = 0;
    bool recorded = false;    // in the core (false: its node is unknown, or DRA serves it)
    bool dra = false;         // on a DRA-served node: the DRA ledger records it
    uint32_t generation = 0;  // the pod list that last saw it
  };
  struct PendingRecord {
    PendingPod pod;
    uint32_t generation = 0;
  };
  struct NodeRecord {
    uint64_t digest = 0;
    uint32_t generation = 0;
    bool valid = false;      // the core accepted its facts
    bool dra = false;        // DRA serves its GPUs
    model::NodeFacts facts;  // as the watch showed them, without the DRA facts (kept to re-apply
                             // the node when its slices change)
  };

  using Feed = MemberFeed<ClusterSync>;

  void beginPodList();
  void endPodList();
  void podEvent(WatchEventType type, const Json& object);
  void beginNodeList();
  void endNodeList();
  void nodeEvent(WatchEventType type, const Json& object);
  void applyPodLocked(const PodView& pod);
  void forgetPodLocked(const std::string& uid);
  void recordLocked(const std::string& uid, PodRecord& rec);
  void applyNodeLocked(const model::NodeFacts& facts);
  void unrecordNodeLocked(const std::string& node);
  void maybeSynced();
  bool draNodeLocked(const std::string& node) const;
  // Applies the known ones of `nodes` again (their slices changed), moving their pods between
  // the two paths.
  void reapplyNodesLocked(const std::set<std::string>& nodes);
  // The node's DRA-ness changed (or it arrived DRA-served): its GPU pods change path.
  void moveDraPodsLocked(const std::string& node, bool to_dra);
  // The pod in its queue's accounting (pending or holding GPUs); caller holds mu_.
  void noteQueuedLocked(const PodView& pod);

  sched::Scheduler& scheduler_;
  adapters::Logger& logger_;
  Feed node_handler_{*this, &ClusterSync::beginNodeList, &ClusterSync::endNodeList, &ClusterSync::nodeEvent};
  Feed pod_handler_{*this, &ClusterSync::beginPodList, &ClusterSync::endPodList, &ClusterSync::podEvent};

  mutable std::mutex mu_;                                              // guards everything below
  std::unordered_map<std::string, PodRecord> pods_;                    // uid -> bound GPU pod
  std::unordered_map<std::string, PendingRecord> pending_;             // uid -> unbound GPU pod
  std::unordered_map<std::string, std::vector<std::string>> orphans_;  // node -> pod uids waiting for it
  std::unordered_map<std::string, NodeRecord> nodes_;
  DraSync dra_;  // guarded by mu_ too
  uint32_t pod_generation_ = 0;
  uint32_t node_generation_ = 0;
  uint64_t conflicts_ = 0;
  std::function<void()> on_synced_;
  std::function<void(const std::string&)> on_pod_watched_;
  bool synced_reported_ = false;

  std::atomic<bool> nodes_synced_{false};
  std::atomic<bool> pods_synced_{false};
};

}  // namespace troupe::kube
