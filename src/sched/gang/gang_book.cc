#include "troupe/sched/gang/gang_book.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_set>

#include "troupe/sched/score/placement.h"

namespace troupe::sched {
namespace {

std::string holdUid(const std::string& gang, uint64_t incarnation, size_t slot) {
  return "gang-hold/" + gang + "@" + std::to_string(incarnation) + "#" + std::to_string(slot);
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t wholeSeconds(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

// "gang ns/g is planned whole: 8 members on 4 nodes (a x2, b x2, ...), ...": the Event a member
// gets when it is steered to its slot.
std::string planMessage(const std::string& gang, const std::vector<GangSlot>& slots, const GangSlot& mine,
                        const GangSpec& spec) {
  std::vector<std::pair<std::string, int>> per_node;  // in plan order
  size_t gpus = 0;
  for (const GangSlot& s : slots) {
    gpus += static_cast<size_t>(s.gpuCount());
    auto it =
        std::find_if(per_node.begin(), per_node.end(), [&](const auto& p) { return p.first == s.node; });
    if (it == per_node.end()) {
      per_node.emplace_back(s.node, 1);
    } else {
      ++it->second;
    }
  }
  std::string nodes;
  for (size_t i = 0; i < per_node.size() && i < 8; ++i) {
    nodes += (i ? ", " : "") + per_node[i].first + " x" + std::to_string(per_node[i].second);
  }
  if (per_node.size() > 8) nodes += " and " + std::to_string(per_node.size() - 8) + " more";
  std::string mine_gpus;
  for (int g : mine.gpus) mine_gpus += (mine_gpus.empty() ? "" : ",") + std::to_string(g);
  return "gang " + gang + " is planned whole: " + std::to_string(slots.size()) + " members on " +
         std::to_string(per_node.size()) + " node" + (per_node.size() == 1 ? "" : "s") + " (" + nodes +
         "), " + std::to_string(gpus) + " GPUs reserved for it; this pod goes to node " + mine.node +
         " (GPUs " + mine_gpus + "); binds wait until every member reaches bind, at most " +
         std::to_string(wholeSeconds(spec.timeout)) + "s (troupe.dev/gang-timeout" +
         (spec.timeout_capped ? ", capped at Troupe's configured maximum" : "") + ")";
}

// "gang ns/g admitted by Troupe: 4 members bound together on nodes a x2, b x2": what the
// native PodGroup's PodGroupScheduled condition says.
std::string admitMessage(const std::string& gang, const std::map<std::string, int>& bound_on) {
  int members = 0;
  std::string nodes;
  size_t shown = 0;
  for (const auto& [node, n] : bound_on) {
    members += n;
    if (shown++ < 16) nodes += (nodes.empty() ? "" : ", ") + node + " x" + std::to_string(n);
  }
  if (bound_on.size() > 16) nodes += " and " + std::to_string(bound_on.size() - 16) + " more";
  return "gang " + gang + " admitted by Troupe: " + std::to_string(members) +
         " members bound together on node" + (bound_on.size() == 1 ? " " : "s ") + nodes;
}

// A gang none of whose members holds GPUs and that nobody filtered for this long is dropped:
// a backstop for pods whose deletion Troupe never heard of (standalone, or a watch outage).
constexpr auto kForgetAfter = std::chrono::minutes(10);

}  // namespace

GangBook::GangBook(ClusterState& cluster, GangBookConfig config)
    : cluster_(cluster), config_(std::move(config)) {}

Clock::time_point GangBook::now() const { return config_.clock ? config_.clock() : Clock::now(); }

void GangBook::notice(GangNotice::Kind kind, const std::string& uid, const std::string& key,
                      const std::string& gang, std::string message) {
  // Bounded: nobody may be draining them (a stalled observer must not grow memory).
  if (notices_.size() >= 10000) return;
  const size_t slash = key.find('/');
  GangNotice n;
  n.kind = kind;
  n.pod_uid = uid;
  if (!key.empty()) {
    n.pod_ns = key.substr(0, slash);
    n.pod_name = slash == std::string::npos ? key : key.substr(slash + 1);
  }
  n.gang = gang;
  n.message = std::move(message);
  if (auto it = gangs_.find(gang); it != gangs_.end()) n.native = it->second.spec.native();
  notices_.push_back(std::move(n));
}

std::vector<GangNotice> GangBook::takeNotices() {
  std::vector<GangNotice> out;
  out.swap(notices_);
  return out;
}

GangEvents GangBook::takeEvents() {
  GangEvents out = std::move(events_);
  events_ = GangEvents{};
  return out;
}

bool GangBook::aheadOf(const Gang& a, const Gang& b) const {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.incarnation < b.incarnation;
}

bool GangBook::active(const Gang& g) const {
  return g.filtered && now() - g.last_seen <= config_.active_window;
}

std::string GangBook::drainOwner(const std::string& node) const {
  auto it = drained_.find(node);
  if (it == drained_.end()) return "";
  auto g = gangs_.find(it->second);
  // A gang nobody filters lately keeps nothing free (expire() also lifts its drain).
  if (g == gangs_.end() || !active(g->second)) return "";
  return it->second;
}

void GangBook::setDrain(Gang& g, std::vector<std::string> nodes) {
  for (const std::string& n : g.drain_nodes) {
    auto it = drained_.find(n);
    if (it != drained_.end() && it->second == g.spec.key) drained_.erase(it);
  }
  g.drain_nodes.clear();
  for (std::string& n : nodes) {
    if (drained_.try_emplace(n, g.spec.key).second) g.drain_nodes.push_back(std::move(n));
  }
}

// ---- membership ----------------------------------------------------------------------------

GangBook::Gang& GangBook::join(const std::string& uid, const std::string& key, std::vector<Completion>* out) {
  if (auto mg = member_gang_.find(uid); mg != member_gang_.end() && mg->second != key) {
    leave(uid, "pod now belongs to gang " + key, out);  // its gang annotation changed
  }
  auto [it, created] = gangs_.try_emplace(key);
  Gang& g = it->second;
  if (created) {
    g.spec.key = key;
    g.incarnation = ++incarnations_;
    g.first_seen = g.last_seen = now();
  }
  if (!uid.empty() && g.members.try_emplace(uid, false).second) member_gang_[uid] = key;
  return g;
}

void GangBook::leave(const std::string& uid, const std::string& why, std::vector<Completion>* out) {
  auto mg = member_gang_.find(uid);
  if (mg == member_gang_.end()) return;
  auto it = gangs_.find(mg->second);
  member_gang_.erase(mg);
  if (it == gangs_.end()) return;
  Gang& g = it->second;
  if (auto m = g.members.find(uid); m != g.members.end()) {
    if (m->second) --g.bound;
    g.members.erase(m);
  }
  for (auto w = g.waiting.begin(); w != g.waiting.end();) {
    if (w->uid == uid) {
      out->emplace_back(std::move(w->done), failedPrecondition(why));
      w = g.waiting.erase(w);
    } else {
      ++w;
    }
  }
  for (GangSlot& s : g.slots) {
    if (s.member_uid == uid) s.member_uid.clear();  // the next member takes it
  }
  if (g.members.empty()) {
    endGang(it, out);
  } else if (!g.pending()) {
    releasePlan(g, "", out);  // nobody left to claim it: a new member is planned afresh
    setDrain(g, {});
  } else {
    checkPlan(g, out);
  }
}

void GangBook::checkPlan(Gang& g, std::vector<Completion>* out) {
  // A plan is made for the members missing then (minimum - bound). A bound member gone since
  // means the plan would now release fewer than the minimum: plan again instead.
  if (!g.slots.empty() && static_cast<int>(g.slots.size()) < g.spec.min_member - g.bound) {
    releasePlan(
        g, "gang " + g.spec.key + " lost a bound member; it is planned afresh for the members now missing",
        out);
  }
}

void GangBook::setBound(const std::string& uid, bool bound, std::vector<Completion>* out) {
  auto mg = member_gang_.find(uid);
  if (mg == member_gang_.end()) return;
  auto it = gangs_.find(mg->second);
  if (it == gangs_.end()) return;
  auto m = it->second.members.find(uid);
  if (m == it->second.members.end() || m->second == bound) return;
  m->second = bound;
  it->second.bound += bound ? 1 : -1;
  if (!bound && out) checkPlan(it->second, out);
}

void GangBook::memberBound(const std::string& uid, const std::string& gang, std::vector<Completion>* out) {
  join(uid, gang, out);
  setBound(uid, true, nullptr);
}

void GangBook::boundElsewhere(const model::Allocation& allocation, std::vector<Completion>* out) {
  // A member the API shows bound that this Troupe did not bind (another replica's
  // kube-scheduler took over, or a binder's outcome was unknown): a plan this Troupe holds
  // for its gang is stale, and binds parked for it will never be wanted.
  auto g = gangs_.find(allocation.gang);
  if (g != gangs_.end() && !g->second.slots.empty()) {
    releasePlan(g->second,
                "gang member " + allocation.pod_key + " was bound to node " + allocation.node +
                    " without this Troupe; the gang's plan here is released",
                out);
  }
}

void GangBook::nodeRemoved(const std::string& name, std::vector<Completion>* out) {
  // A gang planned onto the vanished node is planned afresh at its next member's filter.
  for (auto& [key, g] : gangs_) {
    bool touched =
        std::any_of(g.slots.begin(), g.slots.end(), [&](const GangSlot& slot) { return slot.node == name; });
    if (touched) {
      releasePlan(g, "node " + name + " of gang " + key + "'s plan was removed; the gang is planned afresh",
                  out);
    }
    if (std::find(g.drain_nodes.begin(), g.drain_nodes.end(), name) != g.drain_nodes.end()) {
      std::vector<std::string> rest = g.drain_nodes;
      rest.erase(std::remove(rest.begin(), rest.end(), name), rest.end());
      setDrain(g, std::move(rest));
    }
  }
}

void GangBook::setMinimum(const std::string& key, int min_member, bool native, std::vector<Completion>* out) {
  auto it = gangs_.find(key);
  if (it == gangs_.end() || min_member < 1) return;
  Gang& g = it->second;
  // Only a gang whose minimum comes from this very PodGroup object (parseGang): a gang named by
  // troupe.dev/gang keeps its own size, and a dormant one takes it at its first filter.
  const bool from_object = native ? g.spec.native() : g.spec.source == kPodGroupLabel;
  if (!g.filtered || !from_object || g.spec.min_member == min_member) return;
  const bool lowered = min_member < g.spec.min_member;
  g.spec.min_member = min_member;
  g.stalled.clear();  // the members that stalled may be enough now: plan again
  if (lowered && !g.waiting.empty() && barrierReady(g)) {
    releaseBarrier(g, out);
  } else if (!g.slots.empty() && static_cast<int>(g.slots.size()) < min_member - g.bound) {
    // Raised beyond the plan: the members not yet bound wait for the new minimum together.
    releasePlan(g,
                "gang " + key + "'s PodGroup raised its minimum to " + std::to_string(min_member) +
                    "; its plan was released and it is planned afresh",
                out);
  }
}

GangBook::GangMap::iterator GangBook::endGang(GangMap::iterator it, std::vector<Completion>* out) {
  Gang& g = it->second;
  for (Waiter& w : g.waiting) {
    out->emplace_back(std::move(w.done),
                      failedPrecondition("gang " + g.spec.key + " ended: none of its pods is left"));
  }
  g.waiting.clear();
  releasePlan(g, "", out);
  setDrain(g, {});
  for (const auto& [uid, bound] : g.members) member_gang_.erase(uid);
  if (g.filtered) notice(GangNotice::Kind::kEnded, "", "", g.spec.key, "");
  return gangs_.erase(it);
}

// ---- reading -------------------------------------------------------------------------------

std::vector<GangView> GangBook::views() const {
  std::vector<GangView> out;
  for (const auto& [key, g] : gangs_) {
    GangView v;
    v.key = key;
    v.incarnation = g.incarnation;
    v.state = !g.filtered        ? GangView::State::kDormant
              : !g.slots.empty() ? GangView::State::kPlanned
              : g.admitted()     ? GangView::State::kAdmitted
                                 : GangView::State::kWaiting;
    v.min_member = g.filtered ? g.spec.min_member : 0;
    v.members = static_cast<int>(g.members.size());
    v.bound = g.bound;
    for (const GangSlot& s : g.slots) {
      v.held_gpus += s.gpuCount();
      v.held_by_node[s.node] += s.gpuCount();
    }
    v.last_reason = g.last_reason;
    v.waiting_binds = static_cast<int>(g.waiting.size());
    for (const auto& [uid, bound] : g.members) v.member_uids.push_back(uid);
    std::sort(v.member_uids.begin(), v.member_uids.end());
    for (const std::string& n : g.drain_nodes) {
      if (drainOwner(n) == key) v.drained_nodes.push_back(n);
    }
    out.push_back(std::move(v));
  }
  return out;
}

void GangBook::summarize(ClusterSummary::Gangs& s) const {
  for (const auto& [key, g] : gangs_) {
    if (!g.filtered) continue;  // dormant: bound pods read from the API, no member filtered yet
    const bool unbound_members = static_cast<int>(g.members.size()) > g.bound;
    if (!g.slots.empty()) {
      ++s.planned;
    } else if (!g.admitted() && unbound_members) {
      ++s.waiting;
    } else {
      ++s.admitted;  // running, waiting for nothing (also one left short of its minimum)
    }
    for (const GangSlot& slot : g.slots) s.held_gpus += slot.gpuCount();
  }
  for (const auto& [node, owner] : drained_) s.draining_nodes += drainOwner(node) == owner ? 1 : 0;
}

GangBook::Progress GangBook::progress(const std::string& key) const {
  Progress p;
  auto g = gangs_.find(key);
  if (g == gangs_.end()) return p;
  p.exists = true;
  p.planned = !g->second.slots.empty();
  p.admitted = g->second.admitted();
  p.bound = g->second.bound;
  p.min_member = g->second.filtered ? g->second.spec.min_member : 0;
  return p;
}

std::vector<std::string> GangBook::memberUids(const std::string& key) const {
  std::vector<std::string> out;
  auto g = gangs_.find(key);
  if (g == gangs_.end()) return out;
  for (const auto& [uid, bound] : g->second.members) out.push_back(uid);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> GangBook::slotNode(const std::string& gang, const std::string& uid) const {
  auto g = gangs_.find(gang);
  if (g == gangs_.end() || g->second.slots.empty()) return std::nullopt;
  std::string slot_node;
  for (const GangSlot& slot : g->second.slots) {
    if (slot.member_uid == uid) slot_node = slot.node;
  }
  return slot_node;
}

// ---- planning --------------------------------------------------------------------------------

GangBook::Gang* GangBook::gangFor(const PodFacts& pod, const GpuRequest& req, const GangSpec& spec_in,
                                  std::string* refused, std::vector<Completion>* out) {
  if (!gangs_.count(spec_in.key) && gangs_.size() >= config_.max_gangs) {
    *refused = "troupe: Troupe already tracks " + std::to_string(gangs_.size()) +
               " gangs (its configured maximum); gang " + spec_in.key +
               " is considered once others have ended";
    return nullptr;
  }
  GangSpec spec = spec_in;
  if (spec.timeout > config_.max_timeout) {
    spec.timeout = config_.max_timeout;
    spec.timeout_capped = true;
  }
  Gang& g = join(pod.uid, spec.key, out);
  if (!g.filtered) {
    g.filtered = true;
    g.spec = spec;
    g.request = req;
    g.priority = pod.priority;
  } else if (!g.admitted() && (g.spec.min_member != spec.min_member || g.request.gpus != req.gpus ||
                               g.request.milli_per_gpu != req.milli_per_gpu ||
                               g.request.topology_required != req.topology_required ||
                               g.request.topology_preferred != req.topology_preferred)) {
    // The gang changed shape while waiting: its old plan is worthless, and so are binds
    // parked for it.
    releasePlan(
        g,
        "gang " + spec.key + " changed its size or request; its plan was released and it is planned afresh",
        out);
    g.spec = spec;
    g.request = req;
  } else {
    g.spec.timeout = spec.timeout;
    g.spec.timeout_capped = spec.timeout_capped;
  }
  // A PodGroup's own priority places the gang; else its members' highest.
  g.priority = spec.priority ? *spec.priority : std::max(g.priority, pod.priority);
  g.last_seen = now();
  return &g;
}

bool GangBook::plan(Gang& g, const std::vector<std::string>& candidates, std::string* reason, bool* never,
                    std::vector<Completion>* out) {
  std::vector<const model::NodeState*> nodes, with_drained;
  nodes.reserve(candidates.size());
  std::string kept_for;  // a gang that keeps some of the candidates free
  for (const std::string& name : candidates) {
    const model::NodeState* node = cluster_.find(name);
    if (!node) continue;
    with_drained.push_back(node);
    const std::string owner = drainOwner(name);
    if (!owner.empty() && owner != g.spec.key) {
      kept_for = owner;
      continue;  // kept free for another gang
    }
    nodes.push_back(node);
  }
  // Members holding their GPUs (bound, e.g. before a restart) count towards the minimum.
  const int need = std::max(0, g.spec.min_member - g.bound);
  GangPlanResult plan = planGang(nodes, g.request, need, g.spec.key, config_.topology_levels);
  if (plan.slots.empty() && need > 0) {
    *reason = plan.reason;
    *never = plan.never_fits;
    if (plan.never_fits && !kept_for.empty() &&
        !planGang(with_drained, g.request, need, g.spec.key, config_.topology_levels).never_fits) {
      // Counting the nodes kept free for another gang it could fit one day: not "never".
      *never = false;
      *reason = "troupe: gang " + g.spec.key +
                " cannot be placed now: nodes it needs are kept free for gang " + kept_for +
                ", which has waited longer";
    }
    return false;
  }
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    model::Allocation hold;
    hold.pod_uid = holdUid(g.spec.key, g.incarnation, i);
    hold.pod_key = "gang " + g.spec.key;
    hold.node = plan.slots[i].node;
    hold.gpus = plan.slots[i].gpus;
    hold.unknown_gpus = plan.slots[i].dra_gpus;
    hold.milli_per_gpu = g.request.milli_per_gpu;
    if (Status s = cluster_.hold(hold); !s.isOk()) {
      // Cannot happen: the plan was made on these very nodes under this lock.
      g.slots = plan.slots;
      g.slots.resize(i);
      releasePlan(g, "troupe: internal error holding GPUs for gang " + g.spec.key, out);
      *reason = "troupe: internal error holding GPUs for gang " + g.spec.key + ": " + s.message();
      return false;
    }
  }
  g.slots = std::move(plan.slots);
  g.planned_at = now();
  setDrain(g, {});
  return true;
}

void GangBook::releasePlan(Gang& g, const std::string& why, std::vector<Completion>* out) {
  // Binds parked at the barrier wait for slots of this plan: with it gone they fail now
  // (kube-scheduler retries them and the gang is planned afresh), never half-released later.
  for (Waiter& w : g.waiting) out->emplace_back(std::move(w.done), failedPrecondition(why));
  g.waiting.clear();
  for (size_t i = 0; i < g.slots.size(); ++i)
    cluster_.unhold(g.slots[i].node, holdUid(g.spec.key, g.incarnation, i));
  g.slots.clear();
}

// ---- filter ------------------------------------------------------------------------------------

std::optional<FilterResult> GangBook::filter(const PodFacts& pod, const GpuRequest& req, const GangSpec& spec,
                                             const std::vector<std::string>& node_names,
                                             std::vector<Completion>* completions) {
  FilterResult out;
  std::string refused;
  Gang* found = gangFor(pod, req, spec, &refused, completions);
  if (!found) {
    out.failed.addAll(node_names, refused);
    out.categories["gang"] += static_cast<int>(node_names.size());
    return out;
  }
  Gang& g = *found;
  // Members beyond the minimum, once the gang runs: best effort, like any pod.
  if (g.admitted()) return std::nullopt;
  auto failAll = [&](const std::string& reason, bool unresolvable) {
    (unresolvable ? out.unresolvable : out.failed).addAll(node_names, reason);
    out.categories["gang"] += static_cast<int>(node_names.size());
    g.last_reason = reason;
    return out;
  };

  g.candidates = node_names;
  if (g.slots.empty() && !g.stalled.empty()) {
    if (g.stalled.count(pod.uid)) {
      return failAll("troupe: gang " + g.spec.key + ": only " + std::to_string(g.stalled.size()) + " of " +
                         std::to_string(g.spec.min_member) +
                         " members reached Troupe's filter in kube-scheduler's PodGroup cycles; the others "
                         "are rejected before it (see their events). Troupe holds nothing for the gang "
                         "until another member reaches it",
                     false);
    }
    g.stalled.clear();  // a member that had not come before: plan again
  }
  if (g.slots.empty()) {
    if (const std::string ahead = turnAhead(g); !ahead.empty()) {
      return failAll("troupe: gang " + g.spec.key + " waits its turn behind gang " + ahead +
                         " (higher priority or earlier)",
                     false);
    }
    std::string reason;
    bool never = false;
    if (!plan(g, node_names, &reason, &never, completions)) {
      if (!never && now() - g.first_seen > config_.starvation) drainIfStarved(g, req, node_names);
      return failAll(reason, never);
    }
  }
  if (g.admitted()) return std::nullopt;

  std::string no_slot;
  const GangSlot* mine = steer(g, pod, node_names, &no_slot, completions);
  if (!mine) return failAll(no_slot, false);
  // Only its slot's node passes; the others are left out of the answer rather than listed as
  // failed, as narrowing does: kube-scheduler decodes and records every listed node, for each
  // of a large gang's members, and a member with a node left never needs their reasons.
  for (const std::string& n : node_names) {
    if (n == mine->node) {
      out.passed.push_back(n);
    } else {
      ++out.categories["gang"];
    }
  }
  return out;
}

std::string GangBook::turnAhead(const Gang& g) const {
  // Waiting gangs take turns: by priority, then arrival. A gang ahead that would fit now on
  // the nodes it is offered, sharing some with this one, goes first; this one waits with
  // nothing held, so two gangs never split the cluster. Gangs on other nodes do not block.
  const std::set<std::string> mine(g.candidates.begin(), g.candidates.end());
  for (const auto& [key, other] : gangs_) {
    if (&other == &g || other.admitted() || !other.pending() || !other.slots.empty() || !active(other))
      continue;
    if (!aheadOf(other, g)) continue;
    std::vector<const model::NodeState*> theirs;
    bool shared = false;
    for (const std::string& name : other.candidates) {
      const model::NodeState* node = cluster_.find(name);
      if (!node) continue;
      shared = shared || mine.count(name) > 0;
      // As plan() would see them: nodes kept free for a third gang are not theirs.
      const std::string owner = drainOwner(name);
      if (owner.empty() || owner == key) theirs.push_back(node);
    }
    const int their_need = std::max(0, other.spec.min_member - other.bound);
    if (shared && !planGang(theirs, other.request, their_need, key, config_.topology_levels).slots.empty()) {
      return key;
    }
  }
  return "";
}

void GangBook::drainIfStarved(Gang& g, const GpuRequest& req, const std::vector<std::string>& node_names) {
  // Starved: keep the nodes it needs free of new pods until enough GPUs free up there, as
  // batch schedulers do with backfill reservations. Only the head of the line drains.
  for (const auto& [key, other] : gangs_) {
    if (&other != &g && !other.admitted() && other.pending() && other.slots.empty() && active(other) &&
        aheadOf(other, g)) {
      return;
    }
  }
  if (!g.drain_nodes.empty()) return;
  std::vector<const model::NodeState*> by_free;
  for (const std::string& name : node_names) {
    const model::NodeState* node = cluster_.find(name);
    if (node && fitOf(findMisfit(*node, req)) != Fit::kNever) by_free.push_back(node);
  }
  std::sort(by_free.begin(), by_free.end(), [](const model::NodeState* a, const model::NodeState* b) {
    if (a->wholeFreeCount() != b->wholeFreeCount()) return a->wholeFreeCount() > b->wholeFreeCount();
    return a->info().name < b->info().name;
  });
  const int need = std::max(0, g.spec.min_member - g.bound);
  std::vector<std::string> drain;
  int capacity = 0;
  for (const model::NodeState* n : by_free) {
    if (capacity >= need) break;
    const std::string owner = drainOwner(n->info().name);
    if (!owner.empty() && owner != g.spec.key) continue;
    drain.push_back(n->info().name);
    capacity += req.gpus > 0 ? n->gpuCount() / req.gpus : need;
  }
  setDrain(g, std::move(drain));
}

GangSlot* GangBook::steer(Gang& g, const PodFacts& pod, const std::vector<std::string>& node_names,
                          std::string* refused, std::vector<Completion>* out) {
  const std::set<std::string> candidates(node_names.begin(), node_names.end());
  GangSlot* mine = nullptr;
  for (GangSlot& slot : g.slots) {
    if (slot.member_uid == pod.uid) mine = &slot;
  }
  const bool parked =
      std::any_of(g.waiting.begin(), g.waiting.end(), [&](const Waiter& w) { return w.uid == pod.uid; });
  if (mine && !candidates.count(mine->node)) {
    if (parked) {
      // Its bind already waits at the barrier for that node: the slot stays its own.
      *refused = "troupe: gang member " + pod.key() + " already waits to be bound to node " + mine->node;
      return nullptr;
    }
    mine->member_uid.clear();  // kube-scheduler no longer offers that node: pick another slot
    mine = nullptr;
  }
  if (!mine) {
    for (GangSlot& slot : g.slots) {
      if (slot.member_uid.empty() && candidates.count(slot.node)) {
        slot.member_uid = pod.uid;
        mine = &slot;
        notice(GangNotice::Kind::kPlanned, pod.uid, pod.key(), g.spec.key,
               planMessage(g.spec.key, g.slots, slot, g.spec));
        break;
      }
    }
  }
  if (mine) return mine;
  const bool any_free =
      std::any_of(g.slots.begin(), g.slots.end(), [](const GangSlot& s) { return s.member_uid.empty(); });
  if (any_free) {
    // Its free slots are on nodes this member cannot use: plan again next time.
    releasePlan(
        g,
        "gang " + g.spec.key +
            " is re-planned: a member cannot use the nodes of its plan; kube-scheduler retries this pod",
        out);
    *refused = "troupe: gang " + g.spec.key + " was planned on nodes this member cannot use; re-planning";
    return nullptr;
  }
  *refused = "troupe: gang " + g.spec.key + " already has its " + std::to_string(g.slots.size()) +
             " missing members planned; extra members are placed once it runs";
  return nullptr;
}

// ---- the bind barrier ----------------------------------------------------------------------

std::optional<std::string> GangBook::bind(const std::string& uid, const std::string& key,
                                          const std::string& node, const std::string& pending_gang,
                                          BindCallback& done, std::vector<Completion>* out) {
  auto mg = member_gang_.find(uid);
  auto it = mg == member_gang_.end() ? gangs_.end() : gangs_.find(mg->second);
  if (it == gangs_.end()) {
    out->emplace_back(std::move(done),
                      failedPrecondition("gang member " + key + " belongs to no live gang (its gang " +
                                         pending_gang + " ended); it will be planned again"));
    return std::nullopt;
  }
  Gang& g = it->second;
  if (g.admitted()) return it->first;
  const GangSlot* slot = nullptr;
  for (const GangSlot& s : g.slots) {
    if (s.member_uid == uid) slot = &s;
  }
  if (!slot) {
    out->emplace_back(std::move(done),
                      failedPrecondition("gang member " + key + " has no planned place in gang " +
                                         g.spec.key + " (its plan was released); it will be planned again"));
  } else if (slot->node != node) {
    out->emplace_back(std::move(done), failedPrecondition("Troupe planned gang member " + key + " on node " +
                                                          slot->node + ", not " + node));
  } else {
    park(g, uid, key, node, done, out);
  }
  return std::nullopt;
}

void GangBook::park(Gang& g, const std::string& uid, const std::string& key, const std::string& node,
                    BindCallback& done, std::vector<Completion>* out) {
  for (auto w = g.waiting.begin(); w != g.waiting.end();) {
    if (w->uid == uid) {
      // A retry replaces the earlier call, which kube-scheduler no longer waits for.
      out->emplace_back(std::move(w->done),
                        failedPrecondition("bind of " + key + " was retried; this call is superseded"));
      w = g.waiting.erase(w);
    } else {
      ++w;
    }
  }
  if (g.waiting.empty()) g.barrier_deadline = now() + g.spec.timeout;
  g.waiting.push_back(Waiter{uid, key, node, std::move(done)});
  const int arrived = parkedSlots(g);
  const int missing = static_cast<int>(g.slots.size()) - arrived;
  // Every slot's member, or (a minimum lowered since the plan) as many as the gang still needs.
  if (missing == 0 || arrived >= g.spec.min_member - g.bound) {
    releaseBarrier(g, out);
    return;
  }
  notice(
      GangNotice::Kind::kWaiting, uid, key, g.spec.key,
      "waiting at the bind barrier of gang " + g.spec.key + " for " + std::to_string(missing) + " more of " +
          std::to_string(g.slots.size()) + " members; all are bound together once they arrive, or all fail " +
          std::to_string(wholeSeconds(g.barrier_deadline - now())) + "s from now (troupe.dev/gang-timeout)");
}

int GangBook::parkedSlots(const Gang& g) const {
  // One pass over each (a set of the waiting uids): a 1,024-member gang otherwise compared
  // every slot with every waiter on every member's bind, a million string compares a call
  // under the lock that filter needs too.
  std::unordered_set<std::string_view> here;
  here.reserve(g.waiting.size());
  for (const Waiter& w : g.waiting) here.insert(w.uid);
  int parked = 0;
  for (const GangSlot& s : g.slots) parked += here.count(s.member_uid) > 0 ? 1 : 0;
  return parked;
}

bool GangBook::barrierReady(const Gang& g) const {
  const int parked = parkedSlots(g);
  return parked > 0 && parked >= g.spec.min_member - g.bound;
}

void GangBook::releaseBarrier(Gang& g, std::vector<Completion>* out) {
  // The plan is then spent: the GPUs are the members' own; a slot nobody claimed (a minimum
  // lowered since the plan) is given back.
  std::map<std::string, int> bound_on;  // node -> members released onto it
  std::vector<bool> taken(g.slots.size(), false);
  for (Waiter& w : g.waiting) {
    for (size_t i = 0; i < g.slots.size(); ++i) {
      const GangSlot& s = g.slots[i];
      if (s.member_uid != w.uid || s.node != w.node) continue;
      taken[i] = true;
      cluster_.unhold(s.node, holdUid(g.spec.key, g.incarnation, i));
      model::Allocation a;
      a.pod_uid = w.uid;
      a.pod_key = w.key;
      a.node = s.node;
      a.gpus = s.gpus;
      a.unknown_gpus = s.dra_gpus;
      a.milli_per_gpu = g.request.milli_per_gpu;
      a.gang = g.spec.key;
      Status st = cluster_.record(a);
      if (st.isOk()) {
        ++bound_on[s.node];
        setBound(w.uid, true, nullptr);
        out->emplace_back(std::move(w.done), a);
      } else {
        out->emplace_back(std::move(w.done), st);
      }
    }
  }
  for (size_t i = 0; i < g.slots.size(); ++i) {
    if (!taken[i]) cluster_.unhold(g.slots[i].node, holdUid(g.spec.key, g.incarnation, i));
  }
  g.waiting.clear();
  g.slots.clear();
  if (g.admitted()) {
    events_.admit_seconds.push_back(seconds(now() - g.first_seen));
    notice(GangNotice::Kind::kAdmitted, "", "", g.spec.key, admitMessage(g.spec.key, bound_on));
  }
}

void GangBook::expire(std::vector<Completion>* out) {
  const Clock::time_point t = now();
  for (auto it = gangs_.begin(); it != gangs_.end();) {
    Gang& g = it->second;
    if (!g.waiting.empty() && t >= g.barrier_deadline) {
      const std::string msg = "gang " + g.spec.key + ": only " + std::to_string(g.waiting.size()) + " of " +
                              std::to_string(g.slots.size()) + " members reached bind within " +
                              std::to_string(wholeSeconds(g.spec.timeout)) +
                              "s (troupe.dev/gang-timeout); all are released and the gang is planned again";
      for (Waiter& w : g.waiting) {
        notice(GangNotice::Kind::kTimedOut, w.uid, w.key, g.spec.key, msg);
        out->emplace_back(std::move(w.done), deadlineExceeded(msg));
      }
      g.waiting.clear();
      releasePlan(g, msg, out);
      g.last_reason = msg;
      ++events_.timeouts;
    } else if (!g.slots.empty() && g.waiting.empty() && g.spec.native() &&
               t - g.planned_at > g.spec.timeout) {
      // kube-scheduler's PodGroup cycle filters every member and binds them all at once; a
      // plan no bind reached within the gang's timeout belongs to a cycle that failed on
      // something else (another plugin, a member that fits nowhere). Its retries filter the
      // members again, which would keep the GPUs held for good: release, plan afresh then.
      const std::string msg =
          "troupe: gang " + g.spec.key +
          " was planned, but kube-scheduler brought no member to bind within " +
          std::to_string(wholeSeconds(g.spec.timeout)) +
          "s (troupe.dev/gang-timeout): its PodGroup cycle failed on something other than "
          "Troupe (see the members' events); the GPUs are released and the gang is planned "
          "again when kube-scheduler retries it with all its members";
      // Members that never reached Troupe's filter were rejected before it, on every retry
      // alike: planning again for the same members would only hold the GPUs again.
      std::set<std::string> steered;
      for (const GangSlot& slot : g.slots)
        if (!slot.member_uid.empty()) steered.insert(slot.member_uid);
      if (steered.size() < g.slots.size()) g.stalled = std::move(steered);
      releasePlan(g, msg, out);
      g.last_reason = msg;
      notice(GangNotice::Kind::kRefused, "", "", g.spec.key, msg);
    } else if (!g.slots.empty() && g.waiting.empty() &&
               t - g.last_seen > std::max<Clock::duration>(g.spec.timeout, config_.active_window)) {
      releasePlan(g, "", out);  // planned, then abandoned: never keep GPUs for nobody
    }
    if (!g.drain_nodes.empty() && !active(g)) setDrain(g, {});  // nobody asks any more
    if (g.bound == 0 && g.waiting.empty() && g.slots.empty() && t - g.last_seen > kForgetAfter) {
      it = endGang(it, out);
    } else {
      ++it;
    }
  }
}

}  // namespace troupe::sched
