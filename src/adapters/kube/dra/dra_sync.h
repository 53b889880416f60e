// The DRA half of keeping the scheduling core in step with the cluster (docs/dra.md): the
// ResourceSlice and ResourceClaim watches, the DraLedger they fill, and the holdings the ledger
// wants recorded in the core.
//   - ResourceSlices of the GPU drivers make a node without device-plugin GPUs DRA-served (its
//     GPU count, product and memory come from the slices): a slice change has the owner
//     re-apply the nodes it names;
//   - on a DRA-served node every holding is a count whose devices DRA chose, kept by the ledger
//     from allocated ResourceClaims (attributed to the pods in reservedFor) and, until a pod's
//     claim is seen, the pod's own request (provisional). Such pods never go through the
//     per-index path;
//   - each holder's holding is recorded in the core once and replaced only when it changes; one
//     the core refuses is logged once and tried again on the next change;
//   - while a slice or claim list is under way the ledger is partial: nothing is recorded.
// ClusterSync owns one and guards both halves with one lock: DraSync takes it on its own entry
// points (the watch handlers, the apply and delete calls, claimGpus); the *Locked calls are the
// owner's, made under it.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "adapters/common/dra_options.h"
#include "adapters/common/logger.h"
#include "adapters/kube/dra/dra_ledger.h"
#include "adapters/kube/watch/kube_objects.h"
#include "adapters/kube/watch/watch_handler.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::kube {

using DraOptions = adapters::DraOptions;  // the config file's dra section

// Whether the core's allocation `held` already is `want` (the same node, gang and GPUs), so it
// need not be released and recorded again: e.g. the watch's echo of Troupe's own binding.
// ClusterSync's per-index path asks the same.
bool sameHolding(const model::Allocation& held, const model::Allocation& want);

class DraSync {
 public:
  // What DraSync needs of its owner's nodes; the functions are called under `mu`.
  struct Owner {
    std::mutex& mu;                                       // the owner's lock, guarding this object too
    std::function<bool(const std::string& node)> served;  // DRA serves the node's GPUs now
    std::function<std::set<std::string>()> served_nodes;  // every such node
    // Applies the nodes again with what their slices publish now (nodes not known are skipped).
    std::function<void(const std::set<std::string>& nodes)> reapply_nodes;
  };
  DraSync(sched::Scheduler& scheduler, adapters::Logger& logger, DraOptions options, Owner owner);
  DraSync(const DraSync&) = delete;
  DraSync& operator=(const DraSync&) = delete;

  WatchHandler& sliceHandler() { return slice_handler_; }
  WatchHandler& claimHandler() { return claim_handler_; }
  const DraOptions& options() const { return options_; }

  // DRA objects as the API shows them now (also for tests).
  void applySlice(const std::string& name, const DraSliceFacts& slice);
  void deleteSlice(const std::string& name);
  void applyClaim(const DraClaimFacts& claim);
  void deleteClaim(const std::string& uid);
  // The GPUs the pod's ResourceClaims ask of the GPU device classes, from the claims watched;
  // -1 when a claim it names is not known (yet).
  int claimGpus(const sched::PodFacts& pod) const;

  // ---- the owner's, under its lock ----
  // What the GPU drivers' slices publish for the node.
  DraLedger::NodeDevices nodeDevicesLocked(const std::string& node) const;
  // A pod as the API shows it now: its claims, or (bound to a DRA-served node) its provisional
  // count; `generation` is the owner's pod list that saw it.
  void notePodLocked(const PodView& pod, uint32_t generation);
  // The pod moves to the ledger (its node turned DRA-served), holding `pod.gpus`; syncLocked()
  // then records the ledger's holding in place of the one the core keeps.
  void takePodLocked(const std::string& uid, DraPod pod);
  // The pod is gone: a claim reserved for it holds nothing now (or counts for another pod).
  void forgetPodLocked(const std::string& uid);
  // Pods with claims that the pod list of `generation` did not show (gone meanwhile).
  std::vector<std::string> podsNotListedLocked(uint32_t generation) const;
  // The core dropped the node's allocations: forget what was recorded there.
  void forgetNodeLocked(const std::string& node);
  // Records what the ledger says DRA-served nodes hold (only what changed).
  void syncLocked();
  size_t holdersLocked() const { return applied_.size(); }  // pods (or unreserved claims) holding GPUs
  int gpusHeldLocked() const;

 private:
  using Feed = MemberFeed<DraSync>;

  void beginSliceList();
  void endSliceList();
  void sliceEvent(WatchEventType type, const Json& object);
  void beginClaimList();
  void endClaimList();
  void claimEvent(WatchEventType type, const Json& object);
  // Re-applies the nodes whose slices changed (moving their pods between the two paths), then syncs.
  void refreshNodesLocked(const std::set<std::string>& nodes);

  sched::Scheduler& scheduler_;
  adapters::Logger& logger_;
  const DraOptions options_;
  const Owner owner_;
  Feed slice_handler_{*this, &DraSync::beginSliceList, &DraSync::endSliceList, &DraSync::sliceEvent};
  Feed claim_handler_{*this, &DraSync::beginClaimList, &DraSync::endClaimList, &DraSync::claimEvent};

  // Guarded by owner_.mu:
  DraLedger ledger_;
  struct Applied {
    std::string node;
    int gpus = 0;
  };
  std::map<std::string, Applied> applied_;                // holder -> what the core holds for it
  std::set<std::string> refused_;                         // holders the core refused (logged once)
  std::unordered_map<std::string, uint32_t> claim_pods_;  // uid -> generation: pods with claims
  bool slices_listing_ = false;  // a list is under way: the ledger is partial, nothing is synced
  bool claims_listing_ = false;
};

}  // namespace troupe::kube
