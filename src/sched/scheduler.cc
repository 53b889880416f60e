#include "troupe/sched/scheduler.h"

#include <algorithm>
#include <utility>

#include "troupe/model/topology_levels.h"
#include "troupe/sched/kueue_pods.h"
#include "troupe/sched/node_filter.h"
#include "troupe/sched/node_scoring.h"

namespace troupe::sched {
namespace {

GangBookConfig gangBookConfig(const SchedulerConfig& c) {
  return {.max_timeout = c.gang_max_timeout,
          .starvation = c.gang_starvation,
          .active_window = c.gang_active_window,
          .max_gangs = c.max_gangs,
          .topology_levels = c.topology_levels,
          .clock = c.clock};
}

}  // namespace

Scheduler::Scheduler(SchedulerConfig config)
    : config_(std::move(config)),
      gangs_(cluster_, gangBookConfig(config_)),
      pending_(config_.max_pending_pods, config_.max_deleted_pods),
      learner_(config_.learning),
      mix_window_(config_.request_mix_window, config_.request_mix_refresh) {}

Clock::time_point Scheduler::now() const { return config_.clock ? config_.clock() : Clock::now(); }

template <typename Change>
auto Scheduler::withGangs(Change change) {
  std::vector<Completion> completions;
  std::vector<GangNotice> notices;
  auto result = [&] {
    std::unique_lock lock(mu_);
    auto r = change(&completions);
    notices = gangs_.takeNotices();
    if (!completions.empty() && queues_.enabled()) markBoundLocked(completions);
    return r;
  }();
  deliver(std::move(notices), std::move(completions));
  return result;
}

void Scheduler::setGangObserver(GangObserver observer) {
  std::lock_guard lock(hooks_mu_);
  gang_observer_ = std::move(observer);
}

void Scheduler::deliver(std::vector<GangNotice> notices, std::vector<Completion> completions) const {
  if (!notices.empty()) {
    GangObserver observer;
    {
      std::lock_guard lock(hooks_mu_);
      observer = gang_observer_;
    }
    if (observer) {
      for (const GangNotice& n : notices) observer(n);
    }
  }
  for (Completion& c : completions) c.first(std::move(c.second));
}

// ---- cluster model ---------------------------------------------------------------------------

Status Scheduler::upsertNode(const model::NodeFacts& facts) {
  // In full-node mode kube-scheduler sends every candidate's facts with every request, nearly
  // always unchanged: those need no rebuild, and no exclusive lock.
  const uint64_t fingerprint = factsFingerprint(facts);
  {
    std::shared_lock lock(mu_);
    if (cluster_.unchanged(facts.name, fingerprint)) return Status::ok();
  }
  Result<model::NodeInfo> info = model::nodeFromFacts(facts, catalog_);
  if (!info.isOk()) return info.status();
  info.value().topology_domains = model::topologyDomains(facts.labels, config_.topology_levels);
  std::unique_lock lock(mu_);
  cluster_.upsert(std::move(info).value(), fingerprint);
  mix_window_.setClusterCpuPerGpu(cluster_.cpuPerGpu());
  return Status::ok();
}

bool Scheduler::removeNode(const std::string& name) {
  return withGangs([&](std::vector<Completion>* out) {
    const std::optional<uint32_t> ordinal = cluster_.remove(name);
    if (!ordinal) return false;
    score_memo_.forget(*ordinal);
    mix_window_.setClusterCpuPerGpu(cluster_.cpuPerGpu());
    gangs_.nodeRemoved(name, out);
    return true;
  });
}

size_t Scheduler::nodeCount() const {
  std::shared_lock lock(mu_);
  return cluster_.size();
}

Status Scheduler::recordAllocation(const model::Allocation& allocation) {
  // A bound member (read from the API, e.g. after a restart) counts towards its gang's
  // minimum; a pod already gone (terminating) holds GPUs but is no member.
  const bool member = !allocation.gang.empty() && !pending_.deleted(allocation.pod_uid);
  return withGangs([&](std::vector<Completion>* out) {
    if (Status s = cluster_.checkRecord(allocation); !s.isOk()) return s;
    // As reserve does: CPU and memory count only where the node says how much it has.
    model::Allocation a = allocation;
    const model::NodeInfo& info = cluster_.find(a.node)->info();
    if (info.cpu_milli <= 0) a.cpu_milli = 0;
    if (info.memory_bytes <= 0) a.memory_bytes = 0;
    if (member) gangs_.boundElsewhere(a, out);
    Status s = cluster_.record(a);
    if (s.isOk() && member) gangs_.memberBound(allocation.pod_uid, allocation.gang, out);
    if (s.isOk() && queues_.enabled()) {
      queues_.markBound(allocation.pod_uid, allocation.node,
                        cluster_.find(allocation.node)->info().gpu_product, now());
    }
    return s;
  });
}

bool Scheduler::release(const std::string& pod_uid) {
  queues_.removePod(pod_uid);
  reclaim_.podGone(pod_uid);
  return withGangs([&](std::vector<Completion>* out) {
    if (!cluster_.nodeOf(pod_uid)) return false;
    const bool removed = cluster_.release(pod_uid);
    // A member that gave its GPUs back no longer counts as bound.
    gangs_.setBound(pod_uid, false, out);
    return removed;
  });
}

std::optional<model::Allocation> Scheduler::allocationOf(const std::string& pod_uid) const {
  std::shared_lock lock(mu_);
  return cluster_.allocationOf(pod_uid);
}

bool Scheduler::isGpuNode(const std::string& node) const {
  std::shared_lock lock(mu_);
  const model::NodeState* found = cluster_.find(node);
  return found && found->gpuCount() > 0;
}

// ---- pods between filter and bind ------------------------------------------------------------

Result<GpuRequest> Scheduler::requestOf(const PodFacts& pod, uint64_t fingerprint) const {
  if (std::optional<GpuRequest> known = pending_.request(pod.uid, fingerprint)) return std::move(*known);
  return parseGpuRequest(pod, config_.topology_levels);
}

void Scheduler::recordPassedLocked(const std::string& uid, uint64_t seq,
                                   const std::vector<std::string>& passed,
                                   const std::vector<const model::NodeState*>* nodes,
                                   const std::string& queue, int gang_min) {
  if (uid.empty()) return;
  std::vector<uint32_t> ordinals;
  ordinals.reserve(passed.size());
  for (size_t i = 0; i < passed.size(); ++i) {
    const model::NodeState* node = nodes ? (*nodes)[i] : cluster_.index().find(passed[i]);
    if (node) ordinals.push_back(node->ordinal());
  }
  pending_.recordPassed(uid, seq, NodeOrdinalSet(std::move(ordinals)), cluster_.births(), queue, gang_min);
}

Status Scheduler::checkFilteredLocked(const std::string& pod_uid, const std::string& key,
                                      const std::string& node) const {
  const std::optional<PendingPod> pending = pending_.find(pod_uid);
  if (!pending || !pending->filtered) {
    return failedPrecondition(
        "Troupe has no record of pod " + key + " (uid " + pod_uid +
        ") passing its filter: it must pass Troupe's filter before it can be bound "
        "(after a restart of Troupe, kube-scheduler filters the pod again and retries)");
  }
  const model::NodeState* state = cluster_.find(node);
  if (!state) return notFound("node " + node + " is unknown to Troupe");
  if (!cluster_.bornBy(*state, pending->births) || !pending->passed.contains(state->ordinal())) {
    return failedPrecondition("node " + node + " did not pass Troupe's filter for pod " + key +
                              " (its last filter passed " + std::to_string(pending->passed.size()) + " node" +
                              (pending->passed.size() == 1 ? "" : "s") +
                              "): Troupe binds a pod only to a node it filtered it onto");
  }
  return Status::ok();
}

// ---- filter ----------------------------------------------------------------------------------

FilterResult Scheduler::filter(const PodFacts& pod, const std::vector<std::string>& node_names,
                               const PodGroupInfo& pod_group) {
  FilterResult out;
  auto refuseAll = [&](const std::string& reason) {
    // The pod, not the nodes, is wrong: no node will ever do, and the reason says why.
    out.unresolvable.addAll(node_names, reason);
    out.categories["invalid-pod"] = static_cast<int>(node_names.size());
    return out;
  };
  const uint64_t fingerprint = podFingerprint(pod);
  Result<GpuRequest> req = requestOf(pod, fingerprint);
  if (!req.isOk()) return refuseAll("troupe: " + req.status().message());
  Result<std::optional<GangSpec>> gang = parseGang(pod, config_.gang_timeout, pod_group);
  if (!gang.isOk()) return refuseAll("troupe: " + gang.status().message());
  if (gang.value() && !gang.value()->topology_key.empty()) {
    // A native PodGroup's topology constraint acts like troupe.dev/topology-required; with
    // both, the narrower level holds (it lies inside one domain of the wider).
    Result<int> level = gangTopologyLevel(*gang.value(), config_.topology_levels);
    if (!level.isOk()) return refuseAll("troupe: " + level.status().message());
    req.value().topology_required = std::max(req.value().topology_required, level.value());
  }
  // The mix counts each pod once: a pod kube-scheduler retries a hundred times while it waits
  // is still one request.
  uint64_t seq = 0;
  // Kueue's TAS already fixed where it runs (kueue_pods.h): Troupe only picks its GPUs there.
  const bool kueue_placed = kueuePlaced(pod, config_.topology_levels);
  const bool in_gang = gang.value() && req.value().wantsGpus() && !kueue_placed;
  const PendingPods::Seen seen =
      pending_.remember(pod, req.value(), fingerprint, in_gang ? gang.value()->key : "", &seq);
  if (seen == PendingPods::Seen::kDeleted) {
    return refuseAll("troupe: pod " + pod.key() + " (uid " + pod.uid +
                     ") was deleted; Troupe no longer schedules it");
  }
  // By uid: the watch may have counted it already (noteWatchedDemand), or a pending record
  // dropped for room may come back as kFirst.
  if (seen == PendingPods::Seen::kFirst) mix_window_.record(req.value(), pod.uid);
  // Queues (queue_book.h): the pod's queue must be valid, and it may take only what its
  // queue's limit and fair share allow now. The one check when queueing is off.
  std::string queue;
  if (req.value().wantsGpus() && queues_.enabled()) {
    Result<QueueMembership> membership = queues_.membership(pod);
    if (!membership.isOk()) {
      out.unresolvable.addAll(node_names, "troupe: queue: " + membership.status().message());
      out.categories["queue"] = static_cast<int>(node_names.size());
      return out;
    }
    queue = membership.value().queue;
    // Standalone mode has no watch: the filter is how pending demand becomes known.
    const std::optional<QueuedPod> known = queues_.pod(pod.uid);
    if (!known || (!known->bound() && (known->queue != queue || known->milli != req.value().totalMilli()))) {
      queues_.upsertPod(queuedPod(pod, req.value(), queue, gang.value() ? gang.value()->key : ""));
    }
  }
  if (in_gang) {
    return withGangs([&](std::vector<Completion>* completions) {
      const GangSpec& spec = *gang.value();
      std::vector<std::string> candidates;
      FilterResult held_back;
      const std::vector<std::string>* offered = &node_names;
      if (!queue.empty()) {
        const GangBook::Progress progress = gangs_.progress(spec.key);
        if (!progress.planned && !progress.admitted) {
          // Not planned yet: the queue must admit the whole gang (what its bound members hold
          // is not counted twice), or its plan would hold GPUs the queue may not take.
          held_back.passed = node_names;
          holdBackLocked(queue, spec.min_member * req.value().totalMilli(), spec.key, held_back, nullptr);
          holdForReclaimLocked(queue, held_back, nullptr);
          candidates = std::move(held_back.passed);
          held_back.passed.clear();
          offered = &candidates;
        }
      }
      std::optional<FilterResult> answer;
      if (offered->empty()) {
        answer = FilterResult{};
      } else {
        answer = gangs_.filter(pod, req.value(), spec, *offered, completions);
        // nullopt: an admitted gang's member, filtered like a pod on its own.
        if (!answer) answer = filterSingleLocked(req.value(), *offered, spec.key);
      }
      for (const auto& [node, reason] : held_back.failed) answer->failed.add(node, reason);
      for (const auto& [category, n] : held_back.categories) answer->categories[category] += n;
      recordPassedLocked(pod.uid, seq, answer->passed, nullptr, queue, spec.min_member);
      return std::move(*answer);
    });
  }
  std::shared_lock lock(mu_);
  std::vector<const model::NodeState*> passed_nodes;
  out = filterSingleLocked(req.value(), node_names, "", &passed_nodes);
  if (!queue.empty() && !kueue_placed) {  // Kueue's quota admitted a placed pod already
    holdBackLocked(queue, req.value().totalMilli(), "", out, &passed_nodes);
    holdForReclaimLocked(queue, out, &passed_nodes);
  }
  if (config_.narrow_to_best && out.passed.size() > 1) {
    const std::shared_ptr<const RequestMix> mix = mix_window_.current();
    const ModelPressure pressure = modelPressureLocked(*mix);
    const WholeNodePressure whole = wholeNodePressureLocked(*mix);
    const int best =
        narrowToBest(*config_.policy, req.value(), mix, config_.remember_scores ? &score_memo_ : nullptr,
                     passed_nodes, out, &pressure, &whole);
    passed_nodes.assign(1, passed_nodes[static_cast<size_t>(best)]);
  }
  recordPassedLocked(pod.uid, seq, out.passed, &passed_nodes, kueue_placed ? "" : queue);
  return out;
}

ModelPressure Scheduler::modelPressureLocked(const RequestMix& mix) const {
  if (mix.constrained().empty()) return {};
  std::vector<std::pair<std::string, int64_t>> free_by_product;
  cluster_.forEachNode([&](const model::NodeState& node) {
    if (node.gpuCount() == 0) return true;
    const std::string& product = node.info().gpu_product;
    auto it = std::find_if(free_by_product.begin(), free_by_product.end(),
                           [&](const auto& p) { return p.first == product; });
    if (it == free_by_product.end()) it = free_by_product.insert(free_by_product.end(), {product, 0});
    it->second += node.freeMilliTotal();
    return true;
  });
  return ModelPressure::compute(mix, free_by_product);
}

WholeNodePressure Scheduler::wholeNodePressureLocked(const RequestMix& mix) const {
  if (mix.wholeNodeShare() <= 0) return {};
  int64_t free_milli = 0, slots = 0;
  cluster_.forEachNode([&](const model::NodeState& node) {
    free_milli += node.freeMilliTotal();
    slots += WholeNodePressure::slotsOf(node);
    return true;
  });
  return WholeNodePressure::compute(mix.wholeNodeShare(), free_milli, slots);
}

FilterResult Scheduler::filterSingleLocked(const GpuRequest& req, const std::vector<std::string>& node_names,
                                           const std::string& own_gang,
                                           std::vector<const model::NodeState*>* passed_nodes) const {
  DrainOwner drain_owner;
  if (gangs_.draining()) drain_owner = [this](const std::string& node) { return gangs_.drainOwner(node); };
  return filterEachNode(cluster_.index(), req, node_names, drain_owner, own_gang, passed_nodes);
}

FilterResult Scheduler::filterNodes(const PodFacts& pod, const std::vector<model::NodeFacts>& nodes,
                                    std::vector<std::string>* learn_errors, const PodGroupInfo& pod_group) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const model::NodeFacts& facts : nodes) names.push_back(facts.name);
  const std::vector<std::pair<std::string, std::string>> bad = learnNodes(nodes, learn_errors);
  FilterResult out = filter(pod, names, pod_group);
  // A node whose facts are broken is reported with what is broken, not as "unknown".
  out.unresolvable.rewordAll(bad);
  return out;
}

// ---- learn mode ------------------------------------------------------------------------------

std::vector<std::pair<std::string, std::string>> Scheduler::learnNodes(
    const std::vector<model::NodeFacts>& nodes, std::vector<std::string>* learn_errors) {
  std::vector<std::pair<std::string, std::string>> bad;
  if (!learner_.enabled() || nodes.empty()) return bad;
  const Clock::time_point t = now();
  if (learner_.expiryDue(t)) expireLearnedNodes();  // first, so that expired nodes make room
  for (const model::NodeFacts* facts : learner_.admit(nodes, t, &bad, learn_errors)) {
    if (Status s = upsertNode(*facts); !s.isOk()) {
      bad.emplace_back(facts->name, "troupe: " + s.message());
      if (learn_errors) learn_errors->push_back(s.message());
    }
  }
  return bad;
}

size_t Scheduler::expireLearnedNodes() {
  const std::vector<std::string> gone = learner_.expire(now());
  for (const std::string& name : gone) removeNode(name);
  return gone.size();
}

size_t Scheduler::learnedNodeCount() const { return learner_.size(); }

// ---- prioritize, bind, preempt ---------------------------------------------------------------

std::vector<HostValue> Scheduler::prioritize(const PodFacts& pod,
                                             const std::vector<std::string>& node_names) {
  std::vector<HostValue> out;
  out.reserve(node_names.size());
  const uint64_t fingerprint = podFingerprint(pod);
  const std::optional<PendingPod> known = pending_.find(pod.uid);
  Result<GpuRequest> req = known && known->fingerprint == fingerprint
                               ? Result<GpuRequest>(known->request)
                               : parseGpuRequest(pod, config_.topology_levels);
  if (!req.isOk()) {
    for (const std::string& n : node_names) out.push_back({n, -1.0});
    return out;
  }
  if (known && !known->gang.empty()) {
    std::shared_lock lock(mu_);
    if (const std::optional<std::string> slot_node = gangs_.slotNode(known->gang, pod.uid)) {
      // A planned member: its slot's node wins outright, every other node is out.
      for (const std::string& n : node_names) out.push_back({n, n == *slot_node ? 1.0 : -1.0});
      return out;
    }
  }
  if (!known && pending_.remember(pod, req.value(), fingerprint) == PendingPods::Seen::kDeleted) {
    for (const std::string& n : node_names) out.push_back({n, -1.0});
    return out;
  }
  const std::shared_ptr<const RequestMix> mix = mix_window_.current();
  const ScoreContext context{mix.get(), nullptr};
  std::shared_lock lock(mu_);
  // As the narrowing does: scarce GPU models are left to the pods that can use only them.
  const ModelPressure pressure = modelPressureLocked(*mix);
  const WholeNodePressure whole = wholeNodePressureLocked(*mix);
  // Lookups first, as in filter(): independent lookups overlap their cache misses.
  std::vector<const model::NodeState*> found(node_names.size(), nullptr);
  cluster_.index().findAll(node_names, found);
  for (size_t i = 0; i < node_names.size(); ++i) {
    double v = -1.0;  // unknown or no longer fitting
    if (found[i]) {
      if (!req.value().wantsGpus()) {
        v = 0.0;
      } else if (std::optional<Placement> p = placeOnNode(*found[i], req.value())) {
        v = config_.policy->unitScore(*found[i], req.value(), *p, context);
        double penalty = 0.0;
        if (!pressure.empty()) penalty += config_.policy->scarcityPenalty(*found[i], req.value(), pressure);
        if (!whole.empty()) penalty += config_.policy->wholeNodePenalty(*found[i], req.value(), whole);
        if (penalty != 0.0) v = std::max(0.0, v - penalty / 100.0);
      }
    }
    out.push_back({node_names[i], v});
  }
  return out;
}

std::optional<Result<model::Allocation>> Scheduler::heldLocked(const std::string& pod_uid,
                                                               const std::string& key,
                                                               const std::string& node) const {
  const std::string* held = cluster_.nodeOf(pod_uid);
  if (!held) return std::nullopt;
  if (*held == node) {
    if (std::optional<model::Allocation> a = cluster_.allocationOf(pod_uid))
      return Result<model::Allocation>(*a);
  }
  return Result<model::Allocation>(
      failedPrecondition("pod " + key + " already holds GPUs on node " + *held + ", not " + node));
}

Result<model::Allocation> Scheduler::reserve(const std::string& pod_uid, const std::string& pod_ns,
                                             const std::string& pod_name, const std::string& node) {
  const std::string key = pod_ns + "/" + pod_name;
  std::optional<PendingPod> pending = pending_.find(pod_uid);
  std::unique_lock lock(mu_);
  if (std::optional<Result<model::Allocation>> held = heldLocked(pod_uid, key, node))
    return *held;  // a retried bind
  if (!pending) {
    return failedPrecondition("Troupe has no record of pod " + key + " (uid " + pod_uid +
                              "): it must pass Troupe's filter before it can be bound (after a restart of "
                              "Troupe, kube-scheduler filters the pod again and retries)");
  }
  Result<model::Allocation> a = reserveLocked(pod_uid, key, node, pending->request);
  if (a.isOk() && queues_.enabled()) {
    queues_.markBound(pod_uid, node, cluster_.find(node)->info().gpu_product, now());
  }
  return a;
}

Result<model::Allocation> Scheduler::reserveLocked(const std::string& pod_uid, const std::string& key,
                                                   const std::string& node, const GpuRequest& req,
                                                   const std::string& gang) {
  const model::NodeState* found = cluster_.find(node);
  if (!found) return notFound("node " + node + " is unknown to Troupe");
  const model::NodeState& state = *found;
  if (Status s = checkFilteredLocked(pod_uid, key, node); !s.isOk()) return s;
  model::Allocation a;
  a.pod_uid = pod_uid;
  a.pod_key = key;
  a.node = node;
  a.cpu_milli = state.info().cpu_milli > 0 ? req.cpu_milli : 0;
  a.memory_bytes = state.info().memory_bytes > 0 ? req.memory_bytes : 0;
  if (req.wantsGpus()) {
    NodeCheck check = checkNode(state, req);
    if (check.fit != Fit::kFits) {
      return failedPrecondition("pod " + key + " no longer fits node " + node + ": " + check.reason);
    }
    std::optional<Placement> p = placeOnNode(state, req);
    if (!p) return failedPrecondition("pod " + key + " no longer fits node " + node);
    if (req.shared()) {
      // The GPU the policy scored the node by (troupe and fgd: the share that fragments the
      // node least), which is also the one the simulator takes.
      const std::shared_ptr<const RequestMix> mix = mix_window_.current();
      Placement scored = scoreNode(config_.policy, state, req, ScoreContext{mix.get(), nullptr}).placement;
      if (scored.gpus.size() == 1 && scored.gpus[0] >= 0) p->gpus = scored.gpus;
    }
    a.gpus = p->gpus;
    a.unknown_gpus = p->dra_gpus;
    a.milli_per_gpu = req.milli_per_gpu;
    a.topology_quality = p->topology_quality;
  }
  a.gang = gang;
  if (Status st = cluster_.record(a); !st.isOk()) return st;
  return a;
}

void Scheduler::bind(const std::string& pod_uid, const std::string& pod_ns, const std::string& pod_name,
                     const std::string& node, BindCallback done) {
  const std::optional<PendingPod> pending = pending_.find(pod_uid);
  if (!pending || pending->gang.empty()) {
    done(reserve(pod_uid, pod_ns, pod_name, node));
    return;
  }
  const std::string key = pod_ns + "/" + pod_name;
  withGangs([&](std::vector<Completion>* out) {
    if (std::optional<Result<model::Allocation>> held = heldLocked(pod_uid, key, node)) {
      // A retried bind of a member that was already released through the barrier.
      out->emplace_back(std::move(done), std::move(*held));
    } else if (std::optional<std::string> admitted =
                   gangs_.bind(pod_uid, key, node, pending->gang, done, out)) {
      Result<model::Allocation> a = reserveLocked(pod_uid, key, node, pending->request, *admitted);
      if (a.isOk()) gangs_.setBound(pod_uid, true, nullptr);
      out->emplace_back(std::move(done), std::move(a));
    }
    return true;
  });
}

void Scheduler::tick() {
  refreshQueues(false);
  {
    std::shared_lock lock(mu_);
    if (gangs_.empty()) return;
  }
  withGangs([&](std::vector<Completion>* out) {
    gangs_.expire(out);
    return true;
  });
}

void Scheduler::forgetPod(const std::string& pod_uid) {
  if (pod_uid.empty()) return;
  pending_.forget(pod_uid);
  queues_.removePod(pod_uid);
  reclaim_.podGone(pod_uid);
  {
    std::shared_lock lock(mu_);
    if (!gangs_.isMember(pod_uid)) return;  // most pods are in no gang: no exclusive lock
  }
  withGangs([&](std::vector<Completion>* out) {
    gangs_.leave(pod_uid, "pod was deleted while its bind waited at the gang barrier", out);
    return true;
  });
}

std::vector<Scheduler::GangView> Scheduler::gangs() const {
  std::shared_lock lock(mu_);
  return gangs_.views();
}

Scheduler::GangEvents Scheduler::drainGangEvents() {
  std::unique_lock lock(mu_);
  return gangs_.takeEvents();
}

std::map<std::string, std::vector<std::string>> Scheduler::preempt(
    const PodFacts& pod, const std::map<std::string, std::vector<std::string>>& victims) {
  std::map<std::string, std::vector<std::string>> out;
  Result<GpuRequest> req = requestOf(pod, podFingerprint(pod));
  if (!req.isOk()) return out;  // an invalid pod fits nowhere: veto every candidate
  // Gangs are placed whole from free capacity; evicting pods for one member would only
  // strand GPUs, so Troupe vetoes preemption for gang members.
  Result<std::optional<GangSpec>> gang = parseGang(pod, config_.gang_timeout);
  if (!gang.isOk() || gang.value()) return out;
  const bool queues_on = queues_.enabled();
  std::string queue;
  if (queues_on && req.value().wantsGpus()) {
    Result<QueueMembership> membership = queues_.membership(pod);
    if (!membership.isOk()) return out;
    queue = membership.value().queue;
  }
  std::shared_lock lock(mu_);
  for (const auto& [name, uids] : victims) {
    const model::NodeState* node = cluster_.find(name);
    if (!node || uids.empty()) continue;
    if (!req.value().wantsGpus()) {
      out[name] = uids;
      continue;
    }
    std::vector<std::string> evict = uids;
    // A gang is evicted whole or not at all, with or without queues.
    if (!wholeGangsLocked(*node, evict)) continue;
    if (queues_on) {
      // A preemptor whose queue is at its limit takes nothing, whoever is evicted for it.
      if (queues_.limitReason(queue, req.value().totalMilli(), node->info().gpu_product)) continue;
      if (queues_.evictionVeto(evict)) continue;
    }
    model::NodeState trial = *node;  // a copy: evict the victims there, then check
    for (const std::string& uid : evict) trial.remove(uid);
    if (findMisfit(trial, req.value()) == Misfit::kNone) out[name] = std::move(evict);
  }
  return out;
}

bool Scheduler::wholeGangsLocked(const model::NodeState& node, std::vector<std::string>& victims) const {
  std::vector<std::string> gangs;
  for (const std::string& uid : victims) {
    const model::Allocation* a = node.find(uid);
    if (a && !a->gang.empty() && std::find(gangs.begin(), gangs.end(), a->gang) == gangs.end()) {
      gangs.push_back(a->gang);
    }
  }
  for (const std::string& gang : gangs) {
    // Members bound elsewhere would be left running without the rest: not on this node.
    for (const std::string& member : gangs_.memberUids(gang)) {
      const std::string* where = cluster_.nodeOf(member);
      if (where && *where != node.info().name) return false;
    }
    for (const auto& [uid, a] : node.allocations()) {
      if (a.gang == gang && std::find(victims.begin(), victims.end(), uid) == victims.end()) {
        victims.push_back(uid);
      }
    }
  }
  return true;
}

// ---- queues ----------------------------------------------------------------------------------

void Scheduler::setQueues(QueueTree tree) {
  queues_.setQueues(std::move(tree));
  refreshQueues(true);
}

void Scheduler::setNamespaceQueue(const std::string& ns, const std::string& queue) {
  queues_.setNamespaceDefault(ns, queue);
}

QueuedPod Scheduler::queuedPod(const PodFacts& pod, const GpuRequest& req, const std::string& queue,
                               const std::string& gang) const {
  QueuedPod q;
  q.uid = pod.uid;
  q.key = pod.key();
  q.queue = queue;
  q.gang = gang;
  q.milli = req.totalMilli();
  q.models = req.models;
  q.priority = pod.priority;
  q.since = now();
  return q;
}

void Scheduler::notePod(const PodFacts& pod, QueueClock::time_point since) {
  if (pod.uid.empty() || !queues_.enabled()) return;
  Result<GpuRequest> req = parseGpuRequest(pod, config_.topology_levels);
  Result<QueueMembership> membership = queues_.membership(pod);
  const bool finished = pod.phase == "Succeeded" || pod.phase == "Failed";
  // A gated pod (e.g. held by Kueue until its workload is admitted) is no demand yet.
  const bool gated = pod.node_name.empty() && schedulingGated(pod);
  if (finished || gated || !req.isOk() || !req.value().wantsGpus() || !membership.isOk() ||
      pending_.deleted(pod.uid)) {
    queues_.removePod(pod.uid);  // a pod whose request or queue is invalid is not counted
    return;
  }
  // Without its PodGroup object (not read here) a native member's size is unknown, but its
  // gang is not: keep it with its gang for reclaims.
  Result<std::optional<GangSpec>> gang = parseGang(pod, config_.gang_timeout);
  const std::string gang_key = gang.isOk()                    ? (gang.value() ? gang.value()->key : "")
                               : pod.scheduling_group.empty() ? ""
                                                              : gangKeyOf(pod);
  QueuedPod q = queuedPod(pod, req.value(), membership.value().queue, gang_key);
  q.since = since;
  std::shared_lock lock(mu_);
  // Where its GPUs are: the model knows a reservation before the API shows the binding.
  const std::string* held = cluster_.nodeOf(pod.uid);
  q.node = held ? *held : pod.node_name;
  if (const model::NodeState* node = q.node.empty() ? nullptr : cluster_.find(q.node)) {
    q.product = node->info().gpu_product;
  }
  queues_.upsertPod(std::move(q));
}

void Scheduler::noteWatchedDemand(const PodFacts& pod) {
  // Without a uid the pod could not be counted once; a pending pod reaches filter (counting it
  // here would change the order the mix sees pods in from the simulator's).
  if (pod.uid.empty() || pod.node_name.empty() || pod.phase == "Succeeded" || pod.phase == "Failed" ||
      pending_.deleted(pod.uid) || mix_window_.remembers(pod.uid)) {
    return;  // remembers: each status update of a counted pod would otherwise be parsed again
  }
  {
    // The mix is measured against the GPU nodes' CPU: pods elsewhere do not load it.
    std::shared_lock lock(mu_);
    const model::NodeState* node = cluster_.find(pod.node_name);
    if (!node || node->gpuCount() == 0) return;
  }
  Result<GpuRequest> req = parseGpuRequest(pod, config_.topology_levels);
  if (!req.isOk()) return;  // the watch's own decoding reports pods it cannot read
  mix_window_.record(req.value(), pod.uid);
}

std::vector<QueueStatus> Scheduler::queueStatuses() const { return queues_.statuses(); }

void Scheduler::holdBackLocked(const std::string& queue, int64_t milli, const std::string& gang,
                               FilterResult& out, std::vector<const model::NodeState*>* passed_nodes) const {
  // One admission per product (there are few), then a product lookup per node.
  std::vector<std::pair<std::string, std::optional<std::string>>> by_product;
  size_t kept = 0;
  for (size_t i = 0; i < out.passed.size(); ++i) {
    const model::NodeState* node = passed_nodes ? (*passed_nodes)[i] : cluster_.find(out.passed[i]);
    if (!node) {  // unknown here: the filter behind refuses it with its own reason
      if (kept != i) out.passed[kept] = std::move(out.passed[i]);
      ++kept;
      continue;
    }
    const std::string& product = node->info().gpu_product;
    auto it =
        std::find_if(by_product.begin(), by_product.end(), [&](const auto& e) { return e.first == product; });
    if (it == by_product.end()) {
      by_product.emplace_back(product, queues_.admit(queue, milli, product, gang));
      it = by_product.end() - 1;
    }
    if (it->second) {
      out.failed.add(std::move(out.passed[i]), *it->second);
      ++out.categories["queue"];
      continue;
    }
    if (passed_nodes) (*passed_nodes)[kept] = node;
    if (kept != i) out.passed[kept] = std::move(out.passed[i]);  // never onto itself
    ++kept;
  }
  out.passed.resize(kept);
  if (passed_nodes) passed_nodes->resize(kept);
}

void Scheduler::markBoundLocked(const std::vector<Completion>& completions) {
  for (const Completion& c : completions) {
    if (!c.second.isOk()) continue;
    const model::Allocation& a = c.second.value();
    const model::NodeState* node = cluster_.find(a.node);
    queues_.markBound(a.pod_uid, a.node, node ? node->info().gpu_product : "", now());
  }
}

void Scheduler::refreshQueues(bool force) {
  if (!queues_.enabled()) return;
  {
    const Clock::time_point t = now();
    std::lock_guard lock(queue_refresh_mu_);
    if (!force && queues_refreshed_ != Clock::time_point{} && t - queues_refreshed_ < config_.queue_refresh)
      return;
    queues_refreshed_ = t;
  }
  std::shared_lock lock(mu_);
  ProductMilli capacity;
  cluster_.forEachNode([&](const model::NodeState& node) {
    if (!node.info().unschedulable && node.gpuCount() > 0) {
      capacity[node.info().gpu_product] += node.gpuCount() * model::kMilliPerGpu;
    }
    return true;
  });
  queues_.refresh(capacity, [&](const QueuedPod& p) {
    // The request filter parsed, else one rebuilt from the book's numbers.
    GpuRequest req;
    if (std::optional<PendingPod> known = pending_.find(p.uid)) {
      req = known->request;
    } else if (p.milli < model::kMilliPerGpu) {
      req.gpus = 1;
      req.milli_per_gpu = p.milli;
      req.models = p.models;
    } else {
      req.gpus = static_cast<int>(p.milli / model::kMilliPerGpu);
      req.models = p.models;
    }
    bool fits = false;
    cluster_.forEachNode([&](const model::NodeState& node) {
      fits = !node.info().unschedulable && findMisfit(node, req) == Misfit::kNone;
      return !fits;
    });
    return fits;
  });
}

ClusterSummary Scheduler::summary(size_t max_node_rows) const {
  ClusterSummary s;
  s.pending = static_cast<int>(pending_.size());
  const ScoreMemo::Stats memo = score_memo_.stats();
  s.scores_remembered = memo.hits;
  s.scores_computed = memo.misses;
  std::shared_lock lock(mu_);
  cluster_.summarize(s, max_node_rows);
  gangs_.summarize(s.gangs);
  return s;
}

}  // namespace troupe::sched
