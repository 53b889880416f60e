#include "troupe/sched/scheduler/scheduler.h"

#include <algorithm>
#include <array>
#include <utility>

#include "troupe/model/topology_levels.h"
#include "troupe/sched/filter/filter_cycle.h"
#include "troupe/sched/filter/filter_stage_gang.h"
#include "troupe/sched/filter/filter_stage_gpus.h"
#include "troupe/sched/filter/filter_stage_hold.h"
#include "troupe/sched/filter/filter_stage_narrow.h"
#include "troupe/sched/filter/filter_stage_nodes.h"
#include "troupe/sched/filter/filter_stage_queue.h"
#include "troupe/sched/filter/filter_stage_read.h"
#include "troupe/sched/filter/filter_stage_remember.h"
#include "troupe/sched/request/kueue_pods.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {
namespace {

GangBookConfig gangBookConfig(const SchedulerConfig& c) {
  return {.max_timeout = c.gang.max_timeout,
          .starvation = c.gang_starvation,
          .active_window = c.gang_active_window,
          .max_gangs = c.gang.max_gangs,
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

namespace {

// A pod's filter, stage by stage (filter_cycle.h, docs/scheduler-core.md#filter-stages). The pod
// stages run before the model lock: they read the pod and note it.
constexpr std::array<FilterStage, 3> kPodStages{readPodStage, rememberPodStage, queueStage};
// The node stages run under it: shared, or exclusive for a gang member, whose filter may plan
// its gang.
constexpr std::array<FilterStage, 5> kNodeStages{gangStage, checkNodesStage, holdStage, narrowStage,
                                                 chooseGpusStage};

}  // namespace

FilterResult Scheduler::filter(const PodFacts& pod, const std::vector<std::string>& node_names,
                               const PodGroupInfo& pod_group) {
  const FilterParts parts{config_.policy,
                          config_.topology_levels,
                          config_.gang.timeout,
                          config_.narrow_to_best,
                          config_.remember_scores,
                          config_.clock,
                          pending_,
                          mix_window_,
                          queues_,
                          reclaim_,
                          cluster_,
                          gangs_,
                          score_memo_};
  FilterCycle cycle(pod, node_names, pod_group);
  for (FilterStage stage : kPodStages) {
    if (!stage(cycle, parts)) return std::move(cycle.out);
  }
  auto nodeStages = [&] {
    for (FilterStage stage : kNodeStages) {
      if (!stage(cycle, parts)) break;
    }
    recordCycle(cycle, parts);
    return true;
  };
  if (cycle.in_gang) {
    withGangs([&](std::vector<Completion>* completions) {
      cycle.completions = completions;
      return nodeStages();
    });
  } else {
    std::shared_lock lock(mu_);
    nodeStages();
  }
  return std::move(cycle.out);
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
  const ModelPressure pressure = modelPressureOf(cluster_, *mix);
  const WholeNodePressure whole = wholeNodePressureOf(cluster_, *mix);
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
  // kube-scheduler filters the next pod while the last one's bind is in flight, so both may have
  // passed the filter's admission: a pod on its own passes its queue's limits (and its
  // ancestors') again, against what is bound now (docs/queues.md#limits-at-bind). A gang was
  // admitted whole when planned; a pod Kueue placed was charged to no queue here.
  const model::NodeState* target = cluster_.find(node);
  if (target && queues_.enabled() && !pending->queue.empty() && pending->gang.empty() &&
      pending->request.wantsGpus()) {
    const std::optional<QueuedPod> known = queues_.pod(pod_uid);
    std::optional<std::string> why;
    if (!known || !known->bound()) {  // one the book has bound already is counted there
      why = queues_.limitReason(pending->queue, pending->request.totalMilli(), target->info().gpu_product);
    }
    if (why) {
      return failedPrecondition("pod " + key + " is not bound to node " + node + ": " + *why +
                                " (pods of the queue bound after this pod passed Troupe's filter; it is "
                                "filtered again and waits there until its queue has room)");
    }
  }
  Result<model::Allocation> a = reserveLocked(pod_uid, key, node, *pending);
  if (a.isOk() && queues_.enabled()) {
    queues_.markBound(pod_uid, node, cluster_.find(node)->info().gpu_product, now());
  }
  return a;
}

Result<model::Allocation> Scheduler::reserveLocked(const std::string& pod_uid, const std::string& key,
                                                   const std::string& node, const PendingPod& pending,
                                                   const std::string& gang) {
  const GpuRequest& req = pending.request;
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
    // The GPUs the pod's filter chose here, while the node and the mix are as they were then;
    // else chosen now, the same way (filter_stage_gpus.h).
    const std::shared_ptr<const RequestMix> mix = req.shared() ? mix_window_.current() : nullptr;
    std::optional<Placement> p = stillChosen(pending.chosen, state, mix);
    if (!p) p = chooseGpus(config_.policy, state, req, mix.get());
    if (!p) return failedPrecondition("pod " + key + " no longer fits node " + node);
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
      Result<model::Allocation> a = reserveLocked(pod_uid, key, node, *pending, *admitted);
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

void Scheduler::setGangMinimum(const std::string& gang, int min_member, bool native) {
  {
    std::shared_lock lock(mu_);
    const GangBook::Progress p = gangs_.progress(gang);
    if (!p.exists || p.min_member == min_member) return;  // most updates change no minimum
  }
  withGangs([&](std::vector<Completion>* out) {
    gangs_.setMinimum(gang, min_member, native, out);
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
  // What this cycle's filter read and resolved while the pod is unchanged (filter_cycle.h).
  const std::optional<PendingPod> known = pending_.find(pod.uid);
  const bool filtered = known && known->fingerprint == podFingerprint(pod);
  Result<GpuRequest> req =
      filtered ? Result<GpuRequest>(known->request) : parseGpuRequest(pod, config_.topology_levels);
  if (!req.isOk()) return out;  // an invalid pod fits nowhere: veto every candidate
  // Gangs are placed whole from free capacity; evicting pods for one member would only
  // strand GPUs, so Troupe vetoes preemption for gang members.
  Result<std::optional<GangSpec>> gang = parseGang(pod, config_.gang.timeout);
  if (!gang.isOk() || gang.value()) return out;
  const bool queues_on = queues_.enabled();
  std::string queue;
  if (queues_on && req.value().wantsGpus()) {
    if (filtered && known->resolved_queue) {
      queue = *known->resolved_queue;
    } else {
      Result<QueueMembership> membership = queues_.membership(pod);
      if (!membership.isOk()) return out;
      queue = membership.value().queue;
    }
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

// ---- the request mix -------------------------------------------------------------------------

void Scheduler::noteWatchedDemand(const PodFacts& pod, const std::optional<GpuRequest>* parsed) {
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
  if (parsed) {
    if (*parsed) mix_window_.record(**parsed, pod.uid);
    return;  // one that does not parse: the watch's own decoding reports it
  }
  Result<GpuRequest> req = parseGpuRequest(pod, config_.topology_levels);
  if (!req.isOk()) return;  // the watch's own decoding reports pods it cannot read
  mix_window_.record(req.value(), pod.uid);
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
