#include "adapters/kube/watch/cluster_sync.h"

#include <algorithm>
#include <bit>

#include "troupe/model/gpu_selection.h"

namespace troupe::kube {
namespace {

uint64_t fnv(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  h ^= 0xff;  // separator, so ("ab","c") and ("a","bc") differ
  h *= 1099511628211ULL;
  return h;
}

// The node facts the core reads; status heartbeats and other fields do not change it.
uint64_t digestOf(const model::NodeFacts& f) {
  uint64_t h = 1469598103934665603ULL;
  h = fnv(h, f.name);
  for (const auto& [k, v] : f.labels) h = fnv(fnv(h, k), v);
  for (const auto& [k, v] : f.annotations) {
    if (k.rfind("troupe.dev/", 0) == 0) h = fnv(fnv(h, k), v);
  }
  h = fnv(h, f.allocatable_gpus);
  h = fnv(h, f.cpu);
  h = fnv(h, f.memory);
  h = fnv(h, f.pods);
  h = fnv(h, f.unschedulable ? "1" : "0");
  h = fnv(h, f.dra_driver);
  h = fnv(h, std::to_string(f.dra_devices));
  h = fnv(h, f.dra_product);
  h = fnv(h, std::to_string(f.dra_memory_mib));
  return h;
}

}  // namespace

ClusterSync::ClusterSync(sched::Scheduler& scheduler, adapters::Logger& logger, DraOptions dra)
    : scheduler_(scheduler),
      logger_(logger),
      dra_(scheduler, logger, std::move(dra),
           DraSync::Owner{mu_, [this](const std::string& node) { return draNodeLocked(node); },
                          [this] {
                            std::set<std::string> served;
                            for (const auto& [name, rec] : nodes_) {
                              if (rec.dra) served.insert(name);
                            }
                            return served;
                          },
                          [this](const std::set<std::string>& nodes) { reapplyNodesLocked(nodes); }}) {}

void ClusterSync::onSynced(std::function<void()> callback) {
  std::lock_guard lock(mu_);
  on_synced_ = std::move(callback);
}

void ClusterSync::onPodWatched(std::function<void(const std::string&)> callback) {
  std::lock_guard lock(mu_);
  on_pod_watched_ = std::move(callback);
}

void ClusterSync::maybeSynced() {
  std::function<void()> cb;
  {
    std::lock_guard lock(mu_);
    if (synced_reported_ || !nodes_synced_ || !pods_synced_) return;
    synced_reported_ = true;
    cb = on_synced_;
  }
  if (cb) cb();
}

ClusterSync::Stats ClusterSync::stats() const {
  std::lock_guard lock(mu_);
  Stats s;
  s.nodes = nodes_.size();
  for (const auto& [uid, rec] : pods_) {
    ++(rec.mask != 0 || rec.unknown > 0 || rec.dra ? s.gpu_pods : s.cpu_pods);
    if (rec.unknown > 0) ++s.unknown_pods;
    if (!rec.recorded && !rec.dra) ++s.orphan_pods;  // a DRA pod is recorded by the ledger
  }
  s.conflicts = conflicts_;
  for (const auto& [name, rec] : nodes_) s.dra_nodes += rec.dra ? 1 : 0;
  s.dra_holders = dra_.holdersLocked();
  s.dra_gpus_held = dra_.gpusHeldLocked();
  return s;
}

// ---- pods --------------------------------------------------------------------------------

void ClusterSync::applyPod(const PodView& pod) {
  const std::vector<std::string>& levels = scheduler_.config().topology_levels;
  if (pod.request_levels != levels) {
    // Decoded against other topology levels (or built by hand): its request is read again.
    PodView again = pod;
    Result<sched::GpuRequest> req = sched::parseGpuRequest(pod.facts, levels);
    again.request = req.isOk() ? std::optional(req.value()) : std::nullopt;
    again.request_levels = levels;
    std::lock_guard lock(mu_);
    applyPodLocked(again);
    return;
  }
  std::lock_guard lock(mu_);
  applyPodLocked(pod);
}

std::optional<ClusterSync::PendingPod> ClusterSync::pendingPod(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = pending_.find(uid);
  if (it == pending_.end()) return std::nullopt;
  return it->second.pod;
}

std::vector<std::pair<std::string, ClusterSync::PendingPod>> ClusterSync::pendingFor(const std::string& key,
                                                                                     size_t limit) const {
  std::vector<std::pair<std::string, PendingPod>> out;
  std::lock_guard lock(mu_);
  for (const auto& [uid, rec] : pending_) {
    if (out.size() >= limit) break;
    if (rec.pod.gang == key || rec.pod.ns + "/" + rec.pod.name == key) out.emplace_back(uid, rec.pod);
  }
  return out;
}

std::vector<std::pair<std::string, ClusterSync::PendingPod>> ClusterSync::pendingPods() const {
  std::vector<std::pair<std::string, PendingPod>> out;
  {
    std::lock_guard lock(mu_);
    out.reserve(pending_.size());
    for (const auto& [uid, rec] : pending_) out.emplace_back(uid, rec.pod);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

void ClusterSync::noteQueuedLocked(const PodView& pod) {
  // Pending: since it was created; bound: since it started (else since it was created).
  std::optional<std::chrono::system_clock::time_point> wall =
      pod.bound() && pod.started ? pod.started : pod.created;
  const auto& clock = scheduler_.config().clock;
  const sched::QueueClock::time_point now = clock ? clock() : sched::QueueClock::now();
  sched::QueueClock::time_point since = now;
  if (wall) {
    const auto age = std::chrono::system_clock::now() - *wall;
    // A clock skewed into the future counts as just now.
    if (age > std::chrono::system_clock::duration::zero())
      since = now - std::chrono::duration_cast<sched::QueueClock::duration>(age);
  }
  scheduler_.notePod(pod.facts, since, &pod.request);
}

void ClusterSync::applyPodLocked(const PodView& pod) {
  const std::string& uid = pod.facts.uid;
  dra_.notePodLocked(pod, pod_generation_);
  if (!pod.bound() && !pod.terminating && !pod.finished && pod.gpus > 0) {
    pending_[uid] = PendingRecord{PendingPod{pod.facts.ns, pod.facts.name, pod.scheduler_name,
                                             sched::gangKeyOf(pod.facts), pod.created, pod.request},
                                  pod_generation_};
    noteQueuedLocked(pod);
  } else {
    pending_.erase(uid);
  }
  // A pod being deleted is gone for scheduling (kube-scheduler never schedules it again) and
  // leaves its gang now; once bound, it still holds its GPUs until it is gone from the API.
  if (pod.terminating) scheduler_.forgetPod(uid);
  // Every bound pod, CPU-only ones and those of other schedulers too, is part of the request
  // mix; the core counts each once and skips those filter saw.
  if (pod.bound()) scheduler_.noteWatchedDemand(pod.facts, &pod.request);
  auto it = pods_.find(uid);
  if (!pod.bound()) {
    // Not bound (yet): a reservation Troupe's binder holds for it is the binder's business.
    if (it != pods_.end()) it->second.generation = pod_generation_;
    return;
  }
  // CPU-only pods count where their CPU decides what GPU pods fit: on GPU nodes. Elsewhere
  // (and on a node not known yet) Troupe does not track them, nor on DRA-served nodes or with
  // ResourceClaims: there the DRA ledger counts what the pod holds (a claim-only pod reads as
  // CPU-only here, and its claim's device must not be replaced by its CPU).
  const bool cpu_only_counted =
      pod.facts.resource_claims.empty() && pod.facts.extended_resource_claim.empty() &&
      scheduler_.isGpuNode(pod.facts.node_name) && !draNodeLocked(pod.facts.node_name);
  const bool tracked = pod.holdsResources() && (pod.gpus > 0 || cpu_only_counted);
  if (!tracked) {
    if (pod.finished) {
      forgetPodLocked(uid);  // also whatever a binder still held for it
    } else if (it != pods_.end()) {
      forgetPodLocked(uid);  // holds nothing the model counts any more
    }
    return;
  }
  // Being deleted: out of its queue already (forgetPod above), though it holds its GPUs.
  if (!pod.terminating && pod.gpus > 0) noteQueuedLocked(pod);
  PodRecord want;
  want.node = pod.facts.node_name;
  want.key = pod.facts.key();
  want.gang = sched::gangKeyOf(pod.facts);
  want.milli = static_cast<int32_t>(pod.milli_per_gpu);
  want.cpu_milli = pod.cpu_milli;
  want.memory_bytes = pod.memory_bytes;
  want.generation = pod_generation_;
  if (pod.gpus > 0 && draNodeLocked(want.node)) {
    // DRA chose its devices: the ledger records it (notePodLocked above).
    want.dra = true;
    want.unknown = static_cast<int16_t>(pod.gpus);
    if (it != pods_.end()) {
      if (!it->second.recorded && !it->second.dra) {
        auto& waiting = orphans_[it->second.node];
        waiting.erase(std::remove(waiting.begin(), waiting.end(), uid), waiting.end());
      }
      it->second = want;
    } else {
      pods_.emplace(uid, std::move(want));
    }
    return;
  }
  if (!pod.assigned.empty()) {
    want.mask = model::indicesToMask(pod.assigned);
  } else {
    want.unknown = static_cast<int16_t>(pod.gpus);
    if (!pod.assignment_problem.empty() && (it == pods_.end() || it->second.unknown == 0)) {
      logger_.warn("pod GPU annotation unusable; counting its GPUs as held at unknown indices",
                   {{"pod", want.key}, {"node", want.node}, {"error", pod.assignment_problem}});
    }
  }
  if (it != pods_.end()) {
    PodRecord& have = it->second;
    have.generation = pod_generation_;
    // A conflict already turned its indices into unknown ones: the same annotation again
    // changes nothing.
    const bool same = !have.dra && have.node == want.node && have.milli == want.milli &&
                      have.gang == want.gang && have.cpu_milli == want.cpu_milli &&
                      have.memory_bytes == want.memory_bytes &&
                      ((have.mask == want.mask && have.unknown == want.unknown) ||
                       (have.mask == 0 && want.unknown == 0 && have.unknown == std::popcount(want.mask)));
    if (same) return;
    if (have.recorded) {
      // Moved (another node), new indices or resized: drop the old holding first.
      scheduler_.release(uid);
    } else if (have.node != want.node && !have.dra) {
      auto& waiting = orphans_[have.node];
      waiting.erase(std::remove(waiting.begin(), waiting.end(), uid), waiting.end());
    }
    have = want;
    recordLocked(uid, have);
    return;
  }
  PodRecord& rec = pods_.emplace(uid, std::move(want)).first->second;
  recordLocked(uid, rec);
}

void ClusterSync::recordLocked(const std::string& uid, PodRecord& rec) {
  model::Allocation a;
  a.pod_uid = uid;
  a.pod_key = rec.key;
  a.gang = rec.gang;
  a.node = rec.node;
  a.gpus = model::maskToIndices(rec.mask);
  a.milli_per_gpu = rec.milli;
  a.unknown_gpus = rec.unknown;
  a.cpu_milli = rec.cpu_milli;
  a.memory_bytes = rec.memory_bytes;
  if (std::optional<model::Allocation> held = scheduler_.allocationOf(uid)) {
    if (sameHolding(*held, a)) {
      rec.recorded = true;  // e.g. the watch's echo of Troupe's own binding
      return;
    }
    scheduler_.release(uid);  // a stale reservation: the API's truth replaces it
  }
  Status s = scheduler_.recordAllocation(a);
  if (s.isOk()) {
    rec.recorded = true;
    return;
  }
  if (s.code() == Code::kNotFound) {
    rec.recorded = false;  // its node is unknown (yet): recorded when the node arrives
    orphans_[rec.node].push_back(uid);
    return;
  }
  if (rec.mask == 0 && rec.unknown == 0) {
    // No GPUs to count elsewhere (a CPU-only pod, or one with more CPU than a node can count).
    rec.recorded = false;
    logger_.error("cannot record pod", {{"pod", rec.key}, {"node", rec.node}, {"error", s.message()}});
    return;
  }
  // The annotation cannot be honoured (overlaps another pod's GPUs, or out of range): count
  // the GPUs as held at unknown indices so nobody gets them twice.
  ++conflicts_;
  logger_.warn(
      "pod GPU annotation conflicts with the node's state; counting its GPUs as held at unknown indices",
      {{"pod", rec.key}, {"node", rec.node}, {"gpus", formatGpus(a.gpus)}, {"error", s.message()}});
  rec.unknown = static_cast<int16_t>(a.gpus.size() + static_cast<size_t>(a.unknown_gpus));
  rec.mask = 0;
  a.gpus.clear();
  a.unknown_gpus = rec.unknown;
  s = scheduler_.recordAllocation(a);
  rec.recorded = s.isOk();
  if (!s.isOk())
    logger_.error("cannot record pod", {{"pod", rec.key}, {"node", rec.node}, {"error", s.message()}});
}

void ClusterSync::deletePod(const std::string& uid) {
  std::lock_guard lock(mu_);
  forgetPodLocked(uid);
}

void ClusterSync::forgetPodLocked(const std::string& uid) {
  pending_.erase(uid);
  auto it = pods_.find(uid);
  if (it != pods_.end()) {
    if (!it->second.recorded && !it->second.dra) {
      auto& waiting = orphans_[it->second.node];
      waiting.erase(std::remove(waiting.begin(), waiting.end(), uid), waiting.end());
    }
    pods_.erase(it);
  }
  scheduler_.release(uid);
  scheduler_.forgetPod(uid);
  dra_.forgetPodLocked(uid);  // a claim reserved for it holds nothing now
}

void ClusterSync::beginPodList() {
  std::lock_guard lock(mu_);
  ++pod_generation_;
}

void ClusterSync::endPodList() {
  {
    std::lock_guard lock(mu_);
    std::vector<std::string> gone;
    for (const auto& [uid, rec] : pods_) {
      if (rec.generation != pod_generation_) gone.push_back(uid);
    }
    for (const std::string& uid : gone) forgetPodLocked(uid);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.generation == pod_generation_) {
        ++it;
        continue;
      }
      // Deleted while the watch was down: out of its queue's pending demand (and its gang).
      scheduler_.forgetPod(it->first);
      it = pending_.erase(it);
    }
    for (const std::string& uid : dra_.podsNotListedLocked(pod_generation_)) forgetPodLocked(uid);
    if (!gone.empty()) {
      logger_.info("relist: pods gone while the watch was down", {{"released", std::to_string(gone.size())}});
    }
  }
  pods_synced_ = true;
  maybeSynced();
}

void ClusterSync::podEvent(WatchEventType type, const Json& object) {
  if (type == WatchEventType::kDeleted) {
    const std::string uid = uidOf(object);
    if (uid.empty()) return;
    std::lock_guard lock(mu_);
    forgetPodLocked(uid);
    if (on_pod_watched_) on_pod_watched_(uid);
    return;
  }
  // The request is parsed here, once per event (PodView::request), for the sync and the core.
  Result<PodView> pod = decodePod(object, scheduler_.config().topology_levels);
  if (!pod.isOk()) {
    logger_.warn("pod skipped", {{"pod", nameOf(object)}, {"error", pod.status().message()}});
    return;
  }
  std::lock_guard lock(mu_);
  applyPodLocked(pod.value());
  if (pod.value().bound() && on_pod_watched_) on_pod_watched_(pod.value().facts.uid);
}

// ---- nodes -------------------------------------------------------------------------------

void ClusterSync::applyNode(const model::NodeFacts& facts) {
  std::lock_guard lock(mu_);
  applyNodeLocked(facts);
}

void ClusterSync::applyNodeLocked(const model::NodeFacts& raw) {
  NodeRecord& rec = nodes_[raw.name];
  rec.generation = node_generation_;
  rec.facts = raw;
  // What the GPU DRA drivers' slices publish for it; used by the core only when the node has
  // no device-plugin GPUs (then DRA serves nvidia.com/gpu there).
  model::NodeFacts facts = raw;
  const DraLedger::NodeDevices dra = dra_.nodeDevicesLocked(raw.name);
  if (dra.devices > 0) {
    facts.dra_driver = dra.driver;
    facts.dra_devices = dra.devices;
    facts.dra_product = dra.product;
    facts.dra_memory_mib = dra.memory_mib;
  }
  const bool device_plugin = !raw.allocatable_gpus.empty() && raw.allocatable_gpus != "0";
  const bool was_dra = rec.dra && rec.valid;
  const uint64_t digest = digestOf(facts);
  if (rec.valid && rec.digest == digest) return;
  const bool was_valid = rec.valid;
  rec.digest = digest;
  Status s = scheduler_.upsertNode(facts);
  rec.dra = s.isOk() && dra.devices > 0 && !device_plugin;
  if (s.isOk() && was_valid && was_dra != rec.dra) {
    rec.valid = true;
    moveDraPodsLocked(raw.name, rec.dra);
    return;
  }
  if (!s.isOk()) {
    logger_.warn("node facts rejected; Troupe will not place GPU pods on it",
                 {{"node", facts.name}, {"error", s.message()}});
    if (was_valid) {
      scheduler_.removeNode(facts.name);
      unrecordNodeLocked(facts.name);
    }
    rec.valid = false;
    return;
  }
  rec.valid = true;
  if (was_valid) return;
  if (rec.dra) {
    // A DRA-served node Troupe did not know: its pods and claims are the ledger's.
    moveDraPodsLocked(raw.name, true);
    return;
  }
  // A node Troupe did not know: record the pods that were waiting for it.
  auto waiting = orphans_.find(facts.name);
  if (waiting == orphans_.end()) return;
  std::vector<std::string> uids = std::move(waiting->second);
  orphans_.erase(waiting);
  for (const std::string& uid : uids) {
    auto p = pods_.find(uid);
    if (p != pods_.end() && !p->second.recorded && p->second.node == facts.name) recordLocked(uid, p->second);
  }
}

void ClusterSync::moveDraPodsLocked(const std::string& node, bool to_dra) {
  if (to_dra) {
    // Its GPU pods are counted by the ledger from now on; the core keeps what they held until
    // the ledger's holding replaces it (DraSync::syncLocked).
    if (auto waiting = orphans_.find(node); waiting != orphans_.end()) orphans_.erase(waiting);
    for (auto& [uid, rec] : pods_) {
      if (rec.node != node || rec.dra) continue;
      rec.dra = true;
      rec.recorded = false;
      const int gpus = std::popcount(rec.mask) + rec.unknown;
      rec.mask = 0;
      rec.unknown = static_cast<int16_t>(gpus);
      dra_.takePodLocked(uid, DraPod{node, rec.key, rec.gang, gpus, {}});
    }
    dra_.syncLocked();
    return;
  }
  // Back to device-plugin GPUs: the ledger lets go first, then each pod is recorded as usual.
  dra_.syncLocked();
  for (auto& [uid, rec] : pods_) {
    if (rec.node != node || !rec.dra) continue;
    rec.dra = false;
    recordLocked(uid, rec);
  }
}

void ClusterSync::unrecordNodeLocked(const std::string& node) {
  // The core dropped the node's allocations; its pods wait for it to come back.
  dra_.forgetNodeLocked(node);
  for (auto& [uid, rec] : pods_) {
    if (rec.dra && rec.node == node) {
      rec.dra = false;  // counted the usual way until the node is back (and DRA-served again)
      rec.recorded = false;
      orphans_[node].push_back(uid);
    } else if (rec.node == node && rec.recorded) {
      rec.recorded = false;
      orphans_[node].push_back(uid);
    }
  }
}

void ClusterSync::deleteNode(const std::string& name) {
  std::lock_guard lock(mu_);
  nodes_.erase(name);
  if (scheduler_.removeNode(name)) unrecordNodeLocked(name);
}

void ClusterSync::beginNodeList() {
  std::lock_guard lock(mu_);
  ++node_generation_;
}

void ClusterSync::endNodeList() {
  {
    std::lock_guard lock(mu_);
    std::vector<std::string> gone;
    for (const auto& [name, rec] : nodes_) {
      if (rec.generation != node_generation_) gone.push_back(name);
    }
    for (const std::string& name : gone) {
      nodes_.erase(name);
      if (scheduler_.removeNode(name)) unrecordNodeLocked(name);
    }
  }
  nodes_synced_ = true;
  maybeSynced();
}

void ClusterSync::nodeEvent(WatchEventType type, const Json& object) {
  if (type == WatchEventType::kDeleted) {
    const std::string name = nameOf(object);
    if (!name.empty()) deleteNode(name);
    return;
  }
  Result<model::NodeFacts> facts = decodeNode(object);
  if (!facts.isOk()) {
    logger_.warn("node skipped", {{"node", nameOf(object)}, {"error", facts.status().message()}});
    return;
  }
  applyNode(facts.value());
}

// ---- DRA ---------------------------------------------------------------------------------

bool ClusterSync::draNodeLocked(const std::string& node) const {
  auto it = nodes_.find(node);
  return it != nodes_.end() && it->second.valid && it->second.dra;
}

bool ClusterSync::draServed(const std::string& node) const {
  std::lock_guard lock(mu_);
  return draNodeLocked(node);
}

void ClusterSync::reapplyNodesLocked(const std::set<std::string>& nodes) {
  for (const std::string& node : nodes) {
    auto it = nodes_.find(node);
    if (it == nodes_.end()) continue;  // applied with its slices' facts when it arrives
    const model::NodeFacts facts = it->second.facts;
    applyNodeLocked(facts);
  }
}

}  // namespace troupe::kube
