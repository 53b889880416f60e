#include "troupe/sched/scheduler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <string_view>

#include "troupe/model/topology_levels.h"
#include "troupe/sched/best_node.h"
#include "troupe/sched/node_scoring.h"
#include "troupe/sched/shared_node_values.h"

namespace troupe::sched {
namespace {

constexpr const char* kUnknownNode =
    "troupe: node unknown to Troupe (no GPU facts yet; check its nvidia.com/gpu labels, or "
    "that Troupe watches the cluster)";

// Every field of the facts in a fixed order, each string's hash and length mixed in, maps
// preceded by their size. 64 bits: a collision (a changed node taken for unchanged) is not a
// practical risk.
uint64_t factsFingerprint(const model::NodeFacts& facts) {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  auto mix = [&h](std::string_view text) {
    h ^= std::hash<std::string_view>{}(text) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h ^= text.size() * 0xBF58476D1CE4E5B9ULL;
    h *= 0x94D049BB133111EBULL;
  };
  auto mixMap = [&](const model::StringMap& map) {
    mix(std::to_string(map.size()));
    for (const auto& [key, value] : map) {
      mix(key);
      mix(value);
    }
  };
  mix(facts.name);
  mixMap(facts.labels);
  mixMap(facts.annotations);
  mix(facts.allocatable_gpus);
  mix(facts.cpu);
  mix(facts.memory);
  mix(facts.pods);
  mix(facts.unschedulable ? "1" : "0");
  return h == 0 ? 1 : h;  // 0 means "never built"
}

}  // namespace

Scheduler::Scheduler(SchedulerConfig config) : config_(std::move(config)) {}

Clock::time_point Scheduler::now() const { return config_.clock ? config_.clock() : Clock::now(); }

Status Scheduler::upsertNode(const model::NodeFacts& facts) {
  // In full-node mode kube-scheduler sends every candidate's facts with every request, nearly
  // always unchanged: those need no rebuild, and no exclusive lock.
  const uint64_t fingerprint = factsFingerprint(facts);
  {
    std::shared_lock lock(mu_);
    auto it = nodes_.find(facts.name);
    if (it != nodes_.end() && it->second.factsFingerprint() == fingerprint) return Status::ok();
  }
  Result<model::NodeInfo> info = model::nodeFromFacts(facts, catalog_);
  if (!info.isOk()) return info.status();
  info.value().topology_domains = model::topologyDomains(facts.labels, config_.topology_levels);
  std::unique_lock lock(mu_);
  auto it = nodes_.find(facts.name);
  if (it == nodes_.end()) {
    it = nodes_.emplace(facts.name, model::NodeState(std::move(info).value())).first;
    index_.insert(&it->second);
    if (free_ordinals_.empty()) {
      it->second.setOrdinal(next_ordinal_++);
    } else {
      it->second.setOrdinal(free_ordinals_.back());
      free_ordinals_.pop_back();
    }
    const uint32_t ordinal = it->second.ordinal();
    if (ordinal_births_.size() <= ordinal) ordinal_births_.resize(ordinal + 1, 0);
    ordinal_births_[ordinal] = ++births_;
  } else {
    it->second.setInfo(std::move(info).value());
  }
  it->second.setFactsFingerprint(fingerprint);
  return Status::ok();
}

bool Scheduler::removeNode(const std::string& name) {
  std::vector<Completion> completions;
  std::vector<GangNotice> notices;
  {
    std::unique_lock lock(mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return false;
    for (const auto& [uid, a] : it->second.allocations()) pod_node_.erase(uid);
    index_.erase(name);
    score_memo_.forget(it->second.ordinal());
    free_ordinals_.push_back(it->second.ordinal());
    nodes_.erase(it);
    // A gang planned onto the vanished node is planned afresh at its next member's filter.
    for (auto& [key, g] : gangs_) {
      bool touched = std::any_of(g.slots.begin(), g.slots.end(),
                                 [&](const GangSlot& slot) { return slot.node == name; });
      if (touched) {
        releasePlanLocked(
            g, "node " + name + " of gang " + key + "'s plan was removed; the gang is planned afresh",
            &completions);
      }
      if (std::find(g.drain_nodes.begin(), g.drain_nodes.end(), name) != g.drain_nodes.end()) {
        std::vector<std::string> rest = g.drain_nodes;
        rest.erase(std::remove(rest.begin(), rest.end(), name), rest.end());
        setDrainLocked(g, std::move(rest));
      }
    }
    notices.swap(notices_);
  }
  deliver(std::move(notices), std::move(completions));
  return true;
}

size_t Scheduler::nodeCount() const {
  std::shared_lock lock(mu_);
  return nodes_.size();
}

Status Scheduler::recordAllocation(const model::Allocation& allocation) {
  bool deleted = false;
  if (!allocation.gang.empty()) {
    std::lock_guard lock(pending_mu_);
    deleted = deletedPod(allocation.pod_uid);
  }
  std::vector<Completion> completions;
  std::vector<GangNotice> notices;
  Status s = Status::ok();
  {
    std::unique_lock lock(mu_);
    auto node = nodes_.find(allocation.node);
    if (node == nodes_.end()) return notFound("node " + allocation.node + " is unknown to Troupe");
    if (auto held = pod_node_.find(allocation.pod_uid); held != pod_node_.end()) {
      return failedPrecondition("pod " + allocation.pod_key + " already holds GPUs on node " + held->second);
    }
    if (!allocation.gang.empty() && !deleted) {
      // A member the API shows bound that this Troupe did not bind (another replica's
      // kube-scheduler took over, or a binder's outcome was unknown): a plan this Troupe holds
      // for its gang is stale, and binds parked for it will never be wanted.
      auto g = gangs_.find(allocation.gang);
      if (g != gangs_.end() && !g->second.slots.empty()) {
        releasePlanLocked(g->second,
                          "gang member " + allocation.pod_key + " was bound to node " + allocation.node +
                              " without this Troupe; the gang's plan here is released",
                          &completions);
      }
    }
    s = node->second.add(allocation);
    if (s.isOk()) {
      pod_node_[allocation.pod_uid] = allocation.node;
      // A bound member (read from the API, e.g. after a restart) counts towards its gang's
      // minimum; a pod already gone (terminating) holds GPUs but is no member.
      if (!allocation.gang.empty() && !deleted) {
        joinLocked(allocation.pod_uid, allocation.gang, &completions);
        setBoundLocked(allocation.pod_uid, true, nullptr);
      }
    }
    notices.swap(notices_);
  }
  deliver(std::move(notices), std::move(completions));
  return s;
}

bool Scheduler::release(const std::string& pod_uid) {
  std::vector<Completion> completions;
  std::vector<GangNotice> notices;
  bool removed = false;
  {
    std::unique_lock lock(mu_);
    auto held = pod_node_.find(pod_uid);
    if (held == pod_node_.end()) return false;
    auto node = nodes_.find(held->second);
    removed = node != nodes_.end() && node->second.remove(pod_uid);
    pod_node_.erase(held);
    // A member that gave its GPUs back no longer counts as bound.
    setBoundLocked(pod_uid, false, &completions);
    notices.swap(notices_);
  }
  deliver(std::move(notices), std::move(completions));
  return removed;
}

std::optional<model::Allocation> Scheduler::allocationOf(const std::string& pod_uid) const {
  std::shared_lock lock(mu_);
  auto held = pod_node_.find(pod_uid);
  if (held == pod_node_.end()) return std::nullopt;
  auto node = nodes_.find(held->second);
  if (node == nodes_.end()) return std::nullopt;
  const model::Allocation* a = node->second.find(pod_uid);
  if (!a) return std::nullopt;
  return *a;
}

Scheduler::Seen Scheduler::remember(const PodFacts& pod, const GpuRequest& req, const std::string& gang,
                                    uint64_t* seq) {
  if (pod.uid.empty()) return Seen::kFirst;
  std::lock_guard lock(pending_mu_);
  if (deletedPod(pod.uid)) return Seen::kDeleted;  // kube-scheduler's late call for a deleted pod
  auto [it, fresh] = pending_.try_emplace(pod.uid);
  it->second = Pending{req, pod.key(), ++pending_seq_, gang, false, {}, 0};
  if (seq) *seq = it->second.seq;
  if (pending_.size() > config_.max_pending_pods) {
    // Forget the oldest tenth: pods that were filtered long ago and never bound.
    std::vector<std::pair<uint64_t, std::string>> order;
    order.reserve(pending_.size());
    for (const auto& [uid, p] : pending_) order.emplace_back(p.seq, uid);
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < order.size() / 10 + 1; ++i) pending_.erase(order[i].second);
  }
  return fresh ? Seen::kFirst : Seen::kAgain;
}

void Scheduler::recordPassedLocked(const std::string& uid, uint64_t seq,
                                   const std::vector<std::string>& passed,
                                   const std::vector<const model::NodeState*>* nodes) {
  if (uid.empty()) return;
  std::vector<uint32_t> ordinals;
  ordinals.reserve(passed.size());
  for (size_t i = 0; i < passed.size(); ++i) {
    const model::NodeState* node = nodes ? (*nodes)[i] : index_.find(passed[i]);
    if (node) ordinals.push_back(node->ordinal());
  }
  NodeOrdinalSet set(std::move(ordinals));
  std::lock_guard lock(pending_mu_);
  auto it = pending_.find(uid);
  if (it == pending_.end() || it->second.seq != seq) return;  // a later filter of the pod won
  it->second.filtered = true;
  it->second.passed = std::move(set);
  it->second.births = births_;
}

Status Scheduler::checkFilteredLocked(const std::string& pod_uid, const std::string& key,
                                      const std::string& node) const {
  const std::optional<Pending> pending = pendingOf(pod_uid);
  if (!pending || !pending->filtered) {
    return failedPrecondition(
        "Troupe has no record of pod " + key + " (uid " + pod_uid +
        ") passing its filter: it must pass Troupe's filter before it can be bound "
        "(after a restart of Troupe, kube-scheduler filters the pod again and retries)");
  }
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return notFound("node " + node + " is unknown to Troupe");
  const uint32_t ordinal = it->second.ordinal();
  const bool same_node = ordinal < ordinal_births_.size() && ordinal_births_[ordinal] <= pending->births;
  if (!same_node || !pending->passed.contains(ordinal)) {
    return failedPrecondition("node " + node + " did not pass Troupe's filter for pod " + key +
                              " (its last filter passed " + std::to_string(pending->passed.size()) + " node" +
                              (pending->passed.size() == 1 ? "" : "s") +
                              "): Troupe binds a pod only to a node it filtered it onto");
  }
  return Status::ok();
}

std::optional<Scheduler::Pending> Scheduler::pendingOf(const std::string& uid) const {
  std::lock_guard lock(pending_mu_);
  auto it = pending_.find(uid);
  if (it == pending_.end()) return std::nullopt;
  return it->second;
}

FilterResult Scheduler::filter(const PodFacts& pod, const std::vector<std::string>& node_names) {
  FilterResult out;
  Result<GpuRequest> req = parseGpuRequest(pod, config_.topology_levels);
  if (!req.isOk()) {
    // The pod, not the nodes, is wrong: no node will ever do, and the reason says why.
    const std::string reason = "troupe: " + req.status().message();
    out.unresolvable.addAll(node_names, reason);
    out.categories["invalid-pod"] = static_cast<int>(node_names.size());
    return out;
  }
  Result<std::optional<GangSpec>> gang = parseGang(pod, config_.gang_timeout, podGroupOf(pod));
  if (!gang.isOk()) {
    const std::string reason = "troupe: " + gang.status().message();
    out.unresolvable.addAll(node_names, reason);
    out.categories["invalid-pod"] = static_cast<int>(node_names.size());
    return out;
  }
  // The mix counts each pod once: a pod kube-scheduler retries a hundred times while it waits
  // is still one request.
  uint64_t seq = 0;
  const bool in_gang = gang.value() && req.value().wantsGpus();
  const Seen seen = remember(pod, req.value(), in_gang ? gang.value()->key : "", &seq);
  if (seen == Seen::kDeleted) {
    out.unresolvable.addAll(node_names, "troupe: pod " + pod.key() + " (uid " + pod.uid +
                                            ") was deleted; Troupe no longer schedules it");
    out.categories["invalid-pod"] = static_cast<int>(node_names.size());
    return out;
  }
  if (seen == Seen::kFirst) mix_window_.record(req.value());
  if (in_gang) {
    std::vector<Completion> completions;
    std::vector<GangNotice> notices;
    {
      std::unique_lock lock(mu_);
      out = filterGangLocked(pod, req.value(), *gang.value(), node_names, &completions);
      recordPassedLocked(pod.uid, seq, out.passed);
      notices.swap(notices_);
    }
    deliver(std::move(notices), std::move(completions));
    return out;
  }
  std::shared_lock lock(mu_);
  std::vector<const model::NodeState*> passed_nodes;
  out = filterSingleLocked(req.value(), node_names, "", &passed_nodes);
  if (config_.narrow_to_best && out.passed.size() > 1) {
    const int best = narrowLocked(req.value(), passed_nodes, out);
    passed_nodes.assign(1, passed_nodes[static_cast<size_t>(best)]);
  }
  recordPassedLocked(pod.uid, seq, out.passed, &passed_nodes);
  return out;
}

int Scheduler::narrowLocked(const GpuRequest& req, const std::vector<const model::NodeState*>& nodes,
                            FilterResult& out) const {
  const std::shared_ptr<const RequestMix> mix = mix_window_.current();
  const ScoreContext context{mix.get(), nullptr};
  // Nodes in the same scoring state (profile, GPUs in use, ...) share one computed value.
  SharedNodeValues shared(*config_.policy, req, context);
  auto score = [&](const model::NodeState& node) { return shared.value(node); };
  std::vector<double> values(nodes.size());
  if (config_.remember_scores) {
    score_memo_.values(nodes, req, mix, score, values);
  } else {
    for (size_t i = 0; i < nodes.size(); ++i) values[i] = score(*nodes[i]);
  }
  const int best = bestByValue(*config_.policy, nodes, values);
  // The other fitting nodes are left out of the answer, not listed in FailedNodes: kube-scheduler
  // takes the nodes an extender returns and records a status only for those it names, so each
  // listed node costs it decoding and a status per pod (at 5,000 nodes ~300 KB of JSON per pod,
  // more than the rest of its scheduling cycle); no one reads them, since the pod is schedulable.
  std::string keep = std::move(out.passed[static_cast<size_t>(best)]);
  out.passed.assign(1, std::move(keep));
  return best;
}

FilterResult Scheduler::filterSingleLocked(const GpuRequest& req, const std::vector<std::string>& node_names,
                                           const std::string& own_gang,
                                           std::vector<const model::NodeState*>* passed_nodes) const {
  FilterResult out;
  // Every candidate is looked up first, in a batch whose cache misses overlap (at thousands
  // of nodes the nodes no longer fit in cache), then checked in order.
  std::vector<const model::NodeState*> found(node_names.size(), nullptr);
  index_.findAll(node_names, found);
  out.passed.reserve(node_names.size());
  if (passed_nodes) passed_nodes->reserve(node_names.size());
  // Each distinct misfit is worded once per call (the model misfit once per GPU product), and
  // rejections are counted per misfit, then added to the category map at the end.
  constexpr NodeReasons::ReasonId kUnworded = ~NodeReasons::ReasonId{0};
  std::array<NodeReasons::ReasonId, kMisfitKinds> worded;
  worded.fill(kUnworded);
  std::vector<std::pair<std::string_view, NodeReasons::ReasonId>> model_worded;
  std::array<int, kMisfitKinds> misfits{};
  int unknown = 0;
  const bool draining = !drained_.empty();
  for (size_t i = 0; i < node_names.size(); ++i) {
    const std::string& name = node_names[i];
    const model::NodeState* node = found[i];
    if (!node) {
      out.unresolvable.add(name, kUnknownNode);
      ++unknown;
      continue;
    }
    if (draining && req.wantsGpus()) {
      if (std::string owner = drainOwner(name); !owner.empty() && owner != own_gang) {
        out.failed.add(name, "troupe: node is kept free for gang " + owner + ", which has waited too long");
        ++out.categories["drain"];
        continue;
      }
    }
    const Misfit misfit = req.wantsGpus() ? findMisfit(*node, req) : Misfit::kNone;
    if (misfit == Misfit::kNone) {
      out.passed.push_back(name);
      if (passed_nodes) passed_nodes->push_back(node);
      continue;
    }
    ++misfits[static_cast<size_t>(misfit)];
    NodeReasons& reasons = fitOf(misfit) == Fit::kBusy ? out.failed : out.unresolvable;
    NodeReasons::ReasonId id = worded[static_cast<size_t>(misfit)];
    if (misfit == Misfit::kModel) {
      const std::string& product = node->info().gpu_product;
      auto same = [&](const auto& e) { return e.first == product; };
      if (auto w = std::find_if(model_worded.begin(), model_worded.end(), same); w != model_worded.end()) {
        id = w->second;
      } else {
        id = reasons.intern(describeMisfit(misfit, *node, req));
        model_worded.emplace_back(product, id);
      }
    } else if (id == kUnworded) {
      id = reasons.intern(describeMisfit(misfit, *node, req));
      worded[static_cast<size_t>(misfit)] = id;
    }
    reasons.add(name, id);
  }
  if (unknown) out.categories["unknown-node"] += unknown;
  for (size_t m = 0; m < kMisfitKinds; ++m) {
    if (misfits[m]) out.categories[categoryOf(static_cast<Misfit>(m))] += misfits[m];
  }
  return out;
}

FilterResult Scheduler::filterNodes(const PodFacts& pod, const std::vector<model::NodeFacts>& nodes,
                                    std::vector<std::string>* learn_errors) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const model::NodeFacts& facts : nodes) names.push_back(facts.name);
  const std::vector<std::pair<std::string, std::string>> bad = learnNodes(nodes, learn_errors);
  FilterResult out = filter(pod, names);
  // A node whose facts are broken is reported with what is broken, not as "unknown".
  out.unresolvable.rewordAll(bad);
  return out;
}

std::vector<std::pair<std::string, std::string>> Scheduler::learnNodes(
    const std::vector<model::NodeFacts>& nodes, std::vector<std::string>* learn_errors) {
  std::vector<std::pair<std::string, std::string>> bad;
  if (!config_.learning.enabled || nodes.empty()) return bad;
  // Kubernetes names a node with a DNS subdomain: at most 253 characters.
  constexpr size_t kMaxNodeName = 253;
  const Clock::time_point t = now();
  bool expire = false;
  {
    std::lock_guard lock(learn_mu_);
    if (t >= next_expiry_) {
      expire = true;
      next_expiry_ = t + std::chrono::seconds(1);
    }
  }
  if (expire) expireLearnedNodes();  // first, so that expired nodes make room
  size_t refused = 0;
  std::vector<const model::NodeFacts*> accepted;
  accepted.reserve(nodes.size());
  {
    std::lock_guard lock(learn_mu_);
    for (const model::NodeFacts& facts : nodes) {
      if (facts.name.empty() || facts.name.size() > kMaxNodeName) {
        bad.emplace_back(facts.name, "troupe: a node name must have 1 to 253 characters, this one has " +
                                         std::to_string(facts.name.size()) + "; the node was not learned");
        continue;
      }
      auto it = learned_.find(facts.name);
      if (it == learned_.end()) {
        if (learned_.size() >= config_.learning.max_nodes) {
          ++refused;
          bad.emplace_back(facts.name,
                           "troupe: node not learned: Troupe already keeps the most nodes it learns "
                           "from requests (" +
                               std::to_string(config_.learning.max_nodes) +
                               ", learnedNodes.maxNodes); nodes not seen for learnedNodes.ttlSeconds "
                               "are forgotten");
          continue;
        }
        it = learned_.emplace(facts.name, t).first;
      }
      it->second = t;
      accepted.push_back(&facts);
    }
  }
  if (refused > 0 && learn_errors) {
    learn_errors->push_back(std::to_string(refused) + " nodes of the request were not learned: " +
                            std::to_string(config_.learning.max_nodes) +
                            " learned nodes are kept at most (learnedNodes.maxNodes)");
  }
  for (const model::NodeFacts* facts : accepted) {
    Status s = upsertNode(*facts);
    if (!s.isOk()) {
      bad.emplace_back(facts->name, "troupe: " + s.message());
      if (learn_errors) learn_errors->push_back(s.message());
    }
  }
  return bad;
}

size_t Scheduler::expireLearnedNodes() {
  if (!config_.learning.enabled) return 0;
  const Clock::time_point t = now();
  std::vector<std::string> gone;
  {
    std::lock_guard lock(learn_mu_);
    for (auto it = learned_.begin(); it != learned_.end();) {
      if (t - it->second >= config_.learning.ttl) {
        gone.push_back(it->first);
        it = learned_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const std::string& name : gone) removeNode(name);
  return gone.size();
}

size_t Scheduler::learnedNodeCount() const {
  std::lock_guard lock(learn_mu_);
  return learned_.size();
}

std::vector<HostValue> Scheduler::prioritize(const PodFacts& pod,
                                             const std::vector<std::string>& node_names) {
  std::vector<HostValue> out;
  out.reserve(node_names.size());
  Result<GpuRequest> req = parseGpuRequest(pod, config_.topology_levels);
  if (!req.isOk()) {
    for (const std::string& n : node_names) out.push_back({n, -1.0});
    return out;
  }
  const std::optional<Pending> known = pendingOf(pod.uid);
  if (known && !known->gang.empty()) {
    std::shared_lock lock(mu_);
    auto g = gangs_.find(known->gang);
    if (g != gangs_.end() && !g->second.slots.empty()) {
      // A planned member: its slot's node wins outright, every other node is out.
      std::string slot_node;
      for (const GangSlot& slot : g->second.slots) {
        if (slot.member_uid == pod.uid) slot_node = slot.node;
      }
      for (const std::string& n : node_names) out.push_back({n, n == slot_node ? 1.0 : -1.0});
      return out;
    }
  }
  if (!known && remember(pod, req.value()) == Seen::kDeleted) {
    for (const std::string& n : node_names) out.push_back({n, -1.0});
    return out;
  }
  const std::shared_ptr<const RequestMix> mix = mix_window_.current();
  const ScoreContext context{mix.get(), nullptr};
  std::shared_lock lock(mu_);
  // Lookups first, as in filter(): independent lookups overlap their cache misses.
  std::vector<const model::NodeState*> found(node_names.size(), nullptr);
  index_.findAll(node_names, found);
  for (size_t i = 0; i < node_names.size(); ++i) {
    double v = -1.0;  // unknown or no longer fitting
    if (found[i]) {
      if (!req.value().wantsGpus()) {
        v = 0.0;
      } else if (std::optional<Placement> p = placeOnNode(*found[i], req.value())) {
        v = config_.policy->unitScore(*found[i], req.value(), *p, context);
      }
    }
    out.push_back({node_names[i], v});
  }
  return out;
}

Result<model::Allocation> Scheduler::reserve(const std::string& pod_uid, const std::string& pod_ns,
                                             const std::string& pod_name, const std::string& node) {
  const std::string key = pod_ns + "/" + pod_name;
  std::optional<Pending> pending = pendingOf(pod_uid);
  std::unique_lock lock(mu_);
  if (auto held = pod_node_.find(pod_uid); held != pod_node_.end()) {
    auto it = nodes_.find(held->second);
    if (held->second == node && it != nodes_.end()) return *it->second.find(pod_uid);  // a retried bind
    return failedPrecondition("pod " + key + " already holds GPUs on node " + held->second + ", not " + node);
  }
  if (!pending) {
    return failedPrecondition("Troupe has no record of pod " + key + " (uid " + pod_uid +
                              "): it must pass Troupe's filter before it can be bound (after a restart of "
                              "Troupe, kube-scheduler filters the pod again and retries)");
  }
  return reserveLocked(pod_uid, key, node, pending->request);
}

Result<model::Allocation> Scheduler::reserveLocked(const std::string& pod_uid, const std::string& key,
                                                   const std::string& node, const GpuRequest& req) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return notFound("node " + node + " is unknown to Troupe");
  if (Status s = checkFilteredLocked(pod_uid, key, node); !s.isOk()) return s;
  model::Allocation a;
  a.pod_uid = pod_uid;
  a.pod_key = key;
  a.node = node;
  a.cpu_milli = it->second.info().cpu_milli > 0 ? req.cpu_milli : 0;
  a.memory_bytes = it->second.info().memory_bytes > 0 ? req.memory_bytes : 0;
  if (req.wantsGpus()) {
    NodeCheck check = checkNode(it->second, req);
    if (check.fit != Fit::kFits) {
      return failedPrecondition("pod " + key + " no longer fits node " + node + ": " + check.reason);
    }
    std::optional<Placement> p = placeOnNode(it->second, req);
    if (!p) return failedPrecondition("pod " + key + " no longer fits node " + node);
    if (req.shared()) {
      // The GPU the policy scored the node by (troupe and fgd: the share that fragments the
      // node least), which is also the one the simulator takes.
      const std::shared_ptr<const RequestMix> mix = mix_window_.current();
      Placement scored =
          scoreNode(config_.policy, it->second, req, ScoreContext{mix.get(), nullptr}).placement;
      if (scored.gpus.size() == 1 && scored.gpus[0] >= 0) p->gpus = scored.gpus;
    }
    a.gpus = p->gpus;
    a.milli_per_gpu = req.milli_per_gpu;
    a.topology_quality = p->topology_quality;
  }
  if (Status st = it->second.add(a); !st.isOk()) return st;
  pod_node_[pod_uid] = node;
  return a;
}

std::map<std::string, std::vector<std::string>> Scheduler::preempt(
    const PodFacts& pod, const std::map<std::string, std::vector<std::string>>& victims) {
  std::map<std::string, std::vector<std::string>> out;
  Result<GpuRequest> req = parseGpuRequest(pod, config_.topology_levels);
  if (!req.isOk()) return out;  // an invalid pod fits nowhere: veto every candidate
  // Gangs are placed whole from free capacity; evicting pods for one member would only
  // strand GPUs, so Troupe vetoes preemption for gang members.
  Result<std::optional<GangSpec>> gang = parseGang(pod, config_.gang_timeout);
  if (!gang.isOk() || gang.value()) return out;
  std::shared_lock lock(mu_);
  for (const auto& [name, uids] : victims) {
    auto it = nodes_.find(name);
    if (it == nodes_.end() || uids.empty()) continue;
    if (!req.value().wantsGpus()) {
      out[name] = uids;
      continue;
    }
    model::NodeState trial = it->second;  // a copy: evict the victims there, then check
    for (const std::string& uid : uids) trial.remove(uid);
    if (findMisfit(trial, req.value()) == Misfit::kNone) out[name] = uids;
  }
  return out;
}

ClusterSummary Scheduler::summary(size_t max_node_rows) const {
  ClusterSummary s;
  {
    std::lock_guard lock(pending_mu_);
    s.pending = static_cast<int>(pending_.size());
  }
  const ScoreMemo::Stats memo = score_memo_.stats();
  s.scores_remembered = memo.hits;
  s.scores_computed = memo.misses;
  std::shared_lock lock(mu_);
  std::map<std::string, ClusterSummary::Row> rows;
  for (const auto& [name, node] : nodes_) {
    if (node.gpuCount() == 0) continue;
    const std::string product = node.info().gpu_product.empty() ? "unknown" : node.info().gpu_product;
    ClusterSummary::Row& r = rows[product];
    r.product = product;
    ++r.nodes;
    r.gpus += node.gpuCount();
    r.used_milli += node.usedMilliTotal();
    r.shared_gpus += node.sharedGpuCount();
    int free = node.wholeFreeCount();
    r.whole_free += free;
    if (free >= 8) ++r.nodes_with_free_8;
    if (!s.node_rows_omitted && s.by_node.size() == max_node_rows) {
      s.node_rows_omitted = true;
      s.by_node = {};  // frees what was built; no rows from here on
    }
    if (!s.node_rows_omitted) {
      s.by_node.push_back({name, product, node.gpuCount(), node.usedMilliTotal(), node.sharedGpuCount()});
    }
    s.pods += node.podCount();
    // Free GPUs stranded below the node's largest power-of-two request size.
    int largest = 1;
    while (largest * 2 <= std::min(8, node.gpuCount())) largest *= 2;
    s.fragmented_gpus += free % largest;
  }
  for (auto& [p, r] : rows) s.by_product.push_back(r);
  std::sort(
      s.by_node.begin(), s.by_node.end(),
      [](const ClusterSummary::NodeRow& a, const ClusterSummary::NodeRow& b) { return a.node < b.node; });
  for (const auto& [key, g] : gangs_) {
    if (!g.filtered) continue;  // dormant: bound pods read from the API, no member filtered yet
    const bool unbound_members = static_cast<int>(g.members.size()) > g.bound;
    if (!g.slots.empty()) {
      ++s.gangs.planned;
    } else if (!g.admitted() && unbound_members) {
      ++s.gangs.waiting;
    } else {
      ++s.gangs.admitted;  // running, waiting for nothing (also one left short of its minimum)
    }
    for (const GangSlot& slot : g.slots) s.gangs.held_gpus += static_cast<int>(slot.gpus.size());
  }
  for (const auto& [node, owner] : drained_) s.gangs.draining_nodes += drainOwner(node) == owner ? 1 : 0;
  return s;
}

}  // namespace troupe::sched
