#include "adapters/kube/dra/dra_sync.h"

#include "adapters/kube/dra/dra_objects.h"
#include "troupe/model/gpu_selection.h"

namespace troupe::kube {

bool sameHolding(const model::Allocation& held, const model::Allocation& want) {
  if (held.node != want.node || held.unknown_gpus != want.unknown_gpus || held.gang != want.gang)
    return false;
  if (!want.gpus.empty() && held.milli_per_gpu != want.milli_per_gpu) return false;
  return model::indicesToMask(held.gpus) == model::indicesToMask(want.gpus) &&
         held.gpus.size() == want.gpus.size();
}

DraSync::DraSync(sched::Scheduler& scheduler, adapters::Logger& logger, DraOptions options, Owner owner)
    : scheduler_(scheduler),
      logger_(logger),
      options_(std::move(options)),
      owner_(std::move(owner)),
      ledger_(options_.gpu_drivers) {}

// ---- the owner's, under its lock -----------------------------------------------------------

DraLedger::NodeDevices DraSync::nodeDevicesLocked(const std::string& node) const {
  return ledger_.nodeDevices(node);
}

int DraSync::gpusHeldLocked() const {
  int gpus = 0;
  for (const auto& [holder, held] : applied_) gpus += held.gpus;
  return gpus;
}

void DraSync::notePodLocked(const PodView& pod, uint32_t generation) {
  const std::string& uid = pod.facts.uid;
  std::vector<std::string> claims;
  for (const sched::PodClaim& c : pod.facts.resource_claims) {
    if (!c.claim_name.empty()) claims.push_back(c.claim_name);
  }
  if (!pod.facts.extended_resource_claim.empty()) claims.push_back(pod.facts.extended_resource_claim);
  if (pod.finished) {
    // Holds nothing any more, whatever its claims say.
    claim_pods_.erase(uid);
    if (ledger_.removePod(uid)) syncLocked();
    return;
  }
  // Pods with claims, and GPU pods bound to DRA-served nodes (their provisional count).
  const bool on_dra = pod.bound() && owner_.served(pod.facts.node_name);
  if (claims.empty() && !(on_dra && pod.holdsGpus())) {
    if (ledger_.knowsPod(uid)) {
      ledger_.setPod(uid, DraPod{});  // not a DRA pod (any more): holds nothing provisionally
      claim_pods_.erase(uid);
      syncLocked();
    }
    return;
  }
  claim_pods_[uid] = generation;
  ledger_.setPod(uid, DraPod{pod.bound() ? pod.facts.node_name : std::string(), pod.facts.key(),
                             sched::gangKeyOf(pod.facts), pod.holdsGpus() ? pod.gpus : 0, std::move(claims)});
  syncLocked();
}

void DraSync::takePodLocked(const std::string& uid, DraPod pod) { ledger_.setPod(uid, std::move(pod)); }

void DraSync::forgetPodLocked(const std::string& uid) {
  applied_.erase(uid);
  claim_pods_.erase(uid);
  if (ledger_.removePod(uid)) syncLocked();
}

std::vector<std::string> DraSync::podsNotListedLocked(uint32_t generation) const {
  std::vector<std::string> gone;
  for (const auto& [uid, listed] : claim_pods_) {
    if (listed != generation) gone.push_back(uid);
  }
  return gone;
}

void DraSync::forgetNodeLocked(const std::string& node) {
  for (auto it = applied_.begin(); it != applied_.end();) {
    it = it->second.node == node ? applied_.erase(it) : std::next(it);
  }
}

void DraSync::syncLocked() {
  if (slices_listing_ || claims_listing_) return;  // half a list is not the cluster
  const std::map<std::string, DraLedger::Holding> want = ledger_.holdings(owner_.served);
  std::vector<std::string> dropped;
  for (const auto& [holder, held] : applied_) {
    if (!want.count(holder)) dropped.push_back(holder);
  }
  for (const std::string& holder : dropped) {
    scheduler_.release(holder);
    applied_.erase(holder);
  }
  for (const auto& [holder, h] : want) {
    auto it = applied_.find(holder);
    if (it != applied_.end() && it->second.node == h.node && it->second.gpus == h.gpus) continue;
    model::Allocation a;
    a.pod_uid = holder;
    a.pod_key = h.key;
    a.node = h.node;
    a.gang = h.gang;
    a.unknown_gpus = h.gpus;
    if (std::optional<model::Allocation> held = scheduler_.allocationOf(holder)) {
      if (sameHolding(*held, a)) {
        applied_[holder] = Applied{h.node, h.gpus};  // e.g. Troupe's own reservation
        continue;
      }
      scheduler_.release(holder);  // a provisional count, or a reservation, the claim replaces
    }
    applied_.erase(holder);
    Status s = scheduler_.recordAllocation(a);
    if (s.isOk()) {
      applied_[holder] = Applied{h.node, h.gpus};
      refused_.erase(holder);
    } else if (refused_.insert(holder).second) {
      logger_.warn(
          "DRA holding not recorded (tried again on the next change)",
          {{"holder", h.key}, {"node", h.node}, {"gpus", std::to_string(h.gpus)}, {"error", s.message()}});
    }
  }
}

void DraSync::refreshNodesLocked(const std::set<std::string>& nodes) {
  owner_.reapply_nodes(nodes);
  syncLocked();
}

// ---- the watches -----------------------------------------------------------------------------

int DraSync::claimGpus(const sched::PodFacts& pod) const {
  std::lock_guard lock(owner_.mu);
  int gpus = 0;
  for (const sched::PodClaim& c : pod.resource_claims) {
    // A claim made from a template is named in the pod's status once the controller made it.
    if (c.claim_name.empty()) return c.template_name.empty() ? gpus : -1;
    const int n = ledger_.requestedGpus(pod.ns, c.claim_name);
    if (n < 0) return -1;
    gpus += n;
  }
  return gpus;
}

void DraSync::applySlice(const std::string& name, const DraSliceFacts& slice) {
  std::lock_guard lock(owner_.mu);
  std::set<std::string> nodes{ledger_.sliceNode(name), slice.node};
  ledger_.setSlice(name, slice);
  if (slices_listing_) return;
  refreshNodesLocked(nodes);
}

void DraSync::deleteSlice(const std::string& name) {
  std::lock_guard lock(owner_.mu);
  std::set<std::string> nodes{ledger_.sliceNode(name)};
  ledger_.removeSlice(name);
  if (slices_listing_) return;
  refreshNodesLocked(nodes);
}

void DraSync::applyClaim(const DraClaimFacts& claim) {
  std::lock_guard lock(owner_.mu);
  ledger_.setClaim(claim);
  syncLocked();
}

void DraSync::deleteClaim(const std::string& uid) {
  std::lock_guard lock(owner_.mu);
  ledger_.removeClaim(uid);
  syncLocked();
}

void DraSync::beginSliceList() {
  std::lock_guard lock(owner_.mu);
  slices_listing_ = true;
  ledger_.clearSlices();
}

void DraSync::endSliceList() {
  std::lock_guard lock(owner_.mu);
  slices_listing_ = false;
  std::set<std::string> nodes = owner_.served_nodes();  // may have lost their slices
  for (const std::string& node : ledger_.nodes()) nodes.insert(node);
  refreshNodesLocked(nodes);
}

void DraSync::sliceEvent(WatchEventType type, const Json& object) {
  Result<std::pair<std::string, DraSliceFacts>> slice = decodeResourceSlice(object);
  if (!slice.isOk()) {
    logger_.warn("ResourceSlice skipped", {{"slice", nameOf(object)}, {"error", slice.status().message()}});
    return;
  }
  if (type == WatchEventType::kDeleted) {
    deleteSlice(slice.value().first);
  } else {
    applySlice(slice.value().first, slice.value().second);
  }
}

void DraSync::beginClaimList() {
  std::lock_guard lock(owner_.mu);
  claims_listing_ = true;
  ledger_.clearClaims();
}

void DraSync::endClaimList() {
  std::lock_guard lock(owner_.mu);
  claims_listing_ = false;
  syncLocked();
}

void DraSync::claimEvent(WatchEventType type, const Json& object) {
  if (type == WatchEventType::kDeleted) {
    const std::string uid = uidOf(object);
    if (!uid.empty()) deleteClaim(uid);
    return;
  }
  Result<DraClaimFacts> claim = decodeResourceClaim(object, options_.gpu_device_classes);
  if (!claim.isOk()) {
    logger_.warn("ResourceClaim skipped", {{"claim", nameOf(object)}, {"error", claim.status().message()}});
    return;
  }
  applyClaim(claim.value());
}

}  // namespace troupe::kube
