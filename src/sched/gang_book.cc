// The Scheduler's gang bookkeeping: plan a gang whole, hold its GPUs, steer each member to its
// slot, release all members together at the bind barrier, and give everything back when the
// barrier times out or nobody claims the plan. Holds are ordinary allocations on the nodes
// (uid "gang-hold/<gang>#<slot>"), so every other placement sees those GPUs as taken.
#include <algorithm>
#include <set>

#include "troupe/sched/scheduler.h"

namespace troupe::sched {
namespace {

std::string holdUid(const std::string& gang, size_t slot) {
  return "gang-hold/" + gang + "#" + std::to_string(slot);
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// "gang ns/g is planned whole: 8 members on 4 nodes (a x2, b x2, ...), ...": the Event a member
// gets when it is steered to its slot.
std::string planMessage(const std::string& gang, const std::vector<GangSlot>& slots, const GangSlot& mine,
                        std::chrono::milliseconds timeout) {
  std::vector<std::pair<std::string, int>> per_node;  // in plan order
  size_t gpus = 0;
  for (const GangSlot& s : slots) {
    gpus += s.gpus.size();
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
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
         "s (troupe.dev/gang-timeout)";
}

// Stale bookkeeping is dropped after this long without a member being seen.
constexpr auto kForgetAfter = std::chrono::minutes(10);

}  // namespace

void Scheduler::setGangObserver(GangObserver observer) {
  std::lock_guard lock(hooks_mu_);
  gang_observer_ = std::move(observer);
}

void Scheduler::setPodGroupLookup(PodGroupLookup lookup) {
  std::lock_guard lock(hooks_mu_);
  pod_group_lookup_ = std::move(lookup);
}

PodGroupInfo Scheduler::podGroupOf(const PodFacts& pod) const {
  const std::string* name = podGroupName(pod);
  if (!name) return {};
  PodGroupLookup lookup;
  {
    std::lock_guard lock(hooks_mu_);
    lookup = pod_group_lookup_;
  }
  if (!lookup) return PodGroupInfo{std::nullopt, "Troupe does not read PodGroups without the Kubernetes API"};
  return lookup(pod.ns, *name);
}

void Scheduler::notify(const std::vector<GangNotice>& notices) const {
  if (notices.empty()) return;
  GangObserver observer;
  {
    std::lock_guard lock(hooks_mu_);
    observer = gang_observer_;
  }
  if (!observer) return;
  for (const GangNotice& n : notices) observer(n);
}

void Scheduler::noticeLocked(GangNotice::Kind kind, const std::string& uid, const std::string& key,
                             const std::string& gang, std::string message) {
  // Bounded: nobody may be draining them (a stalled observer must not grow memory).
  if (notices_.size() >= 10000) return;
  const size_t slash = key.find('/');
  GangNotice n;
  n.kind = kind;
  n.pod_uid = uid;
  n.pod_ns = key.substr(0, slash);
  n.pod_name = slash == std::string::npos ? key : key.substr(slash + 1);
  n.gang = gang;
  n.message = std::move(message);
  notices_.push_back(std::move(n));
}

bool Scheduler::aheadOf(const Gang& a, const Gang& b) const {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.arrival < b.arrival;
}

std::string Scheduler::drainOwner(const std::string& node) const {
  for (const auto& [key, g] : gangs_) {
    if (g.admitted || !g.slots.empty()) continue;
    if (std::find(g.drain_nodes.begin(), g.drain_nodes.end(), node) != g.drain_nodes.end()) return key;
  }
  return "";
}

Scheduler::Gang& Scheduler::gangFor(const PodFacts& pod, const GpuRequest& req, const GangSpec& spec) {
  auto [it, created] = gangs_.try_emplace(spec.key);
  Gang& g = it->second;
  const Clock::time_point t = now();
  if (created) {
    g.spec = spec;
    g.request = req;
    g.priority = pod.priority;
    g.arrival = ++gang_arrivals_;
    g.first_seen = t;
  } else if (!g.admitted && (g.spec.min_member != spec.min_member || g.request.gpus != req.gpus ||
                             g.request.milli_per_gpu != req.milli_per_gpu ||
                             g.request.topology_required != req.topology_required ||
                             g.request.topology_preferred != req.topology_preferred)) {
    // The gang changed shape while waiting: its old plan is worthless. Waiters keep waiting
    // for the new size (or time out).
    releasePlanLocked(g);
    g.spec = spec;
    g.request = req;
  } else {
    g.spec.timeout = spec.timeout;
  }
  g.priority = std::max(g.priority, pod.priority);
  g.last_seen = t;
  if (!pod.uid.empty()) g.members.insert(pod.uid);
  return g;
}

bool Scheduler::planLocked(Gang& g, const std::vector<std::string>& candidates, std::string* reason,
                           bool* never) {
  std::vector<const model::NodeState*> nodes;
  nodes.reserve(candidates.size());
  for (const std::string& name : candidates) {
    auto it = nodes_.find(name);
    if (it == nodes_.end()) continue;
    const std::string owner = drainOwner(name);
    if (!owner.empty() && owner != g.spec.key) continue;  // kept free for another gang
    nodes.push_back(&it->second);
  }
  // Members already bound (e.g. before a restart) count towards the minimum.
  int bound = 0;
  for (const auto& [name, node] : nodes_) {
    for (const auto& [uid, a] : node.allocations()) bound += a.gang == g.spec.key ? 1 : 0;
  }
  const int need = std::max(0, g.spec.min_member - bound);
  GangPlanResult plan = planGang(nodes, g.request, need, g.spec.key, config_.topology_levels);
  if (plan.slots.empty() && need > 0) {
    *reason = plan.reason;
    *never = plan.never_fits;
    return false;
  }
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    model::Allocation hold;
    hold.pod_uid = holdUid(g.spec.key, i);
    hold.pod_key = "gang " + g.spec.key;
    hold.node = plan.slots[i].node;
    hold.gpus = plan.slots[i].gpus;
    hold.milli_per_gpu = g.request.milli_per_gpu;
    if (Status s = nodes_.at(hold.node).add(hold); !s.isOk()) {
      // Cannot happen: the plan was made on these very nodes under this lock.
      g.slots = plan.slots;
      g.slots.resize(i);
      releasePlanLocked(g);
      *reason = "troupe: internal error holding GPUs for gang " + g.spec.key + ": " + s.message();
      return false;
    }
  }
  g.slots = std::move(plan.slots);
  g.drain_nodes.clear();
  g.admitted = need == 0;
  return true;
}

void Scheduler::releasePlanLocked(Gang& g) {
  for (size_t i = 0; i < g.slots.size(); ++i) {
    if (g.slots[i].bound) continue;
    if (auto it = nodes_.find(g.slots[i].node); it != nodes_.end()) it->second.remove(holdUid(g.spec.key, i));
  }
  g.slots.clear();
}

FilterResult Scheduler::filterGangLocked(const PodFacts& pod, const GpuRequest& req, const GangSpec& spec,
                                         const std::vector<std::string>& node_names) {
  Gang& g = gangFor(pod, req, spec);
  if (g.admitted) {
    // Members beyond the minimum, once the gang runs: best effort, like any pod.
    return filterSingleLocked(req, node_names, g.spec.key);
  }
  FilterResult out;
  auto failAll = [&](const std::string& reason, bool unresolvable, const char* category) {
    (unresolvable ? out.unresolvable : out.failed).addAll(node_names, reason);
    out.categories[category] += static_cast<int>(node_names.size());
    g.last_reason = reason;
    return out;
  };

  g.candidates = node_names;
  if (g.slots.empty()) {
    // Waiting gangs take turns: by priority, then arrival. A gang ahead that would fit now on
    // the nodes it is offered, sharing some with this one, goes first; this one waits with
    // nothing held, so two gangs never split the cluster. Gangs on other nodes do not block.
    const std::set<std::string> mine(node_names.begin(), node_names.end());
    for (auto& [key, other] : gangs_) {
      if (&other == &g || other.admitted || !other.slots.empty()) continue;
      if (now() - other.last_seen > config_.gang_active_window || !aheadOf(other, g)) continue;
      std::vector<const model::NodeState*> theirs;
      bool shared = false;
      for (const std::string& name : other.candidates) {
        auto it = nodes_.find(name);
        if (it == nodes_.end()) continue;
        theirs.push_back(&it->second);
        shared = shared || mine.count(name) > 0;
      }
      if (shared && !planGang(theirs, other.request, other.spec.min_member, key, config_.topology_levels)
                         .slots.empty()) {
        return failAll("troupe: gang " + g.spec.key + " waits its turn behind gang " + key +
                           " (higher priority or earlier)",
                       false, "gang");
      }
    }
    std::string reason;
    bool never = false;
    if (!planLocked(g, node_names, &reason, &never)) {
      if (!never && now() - g.first_seen > config_.gang_starvation) {
        // Starved: keep the nodes it needs free of new pods until enough GPUs free up there,
        // as batch schedulers do with backfill reservations. Only the head of the line drains.
        bool head = true;
        for (const auto& [key, other] : gangs_) {
          if (&other != &g && !other.admitted && other.slots.empty() &&
              now() - other.last_seen <= config_.gang_active_window && aheadOf(other, g)) {
            head = false;
          }
        }
        if (head && g.drain_nodes.empty()) {
          std::vector<const model::NodeState*> by_free;
          for (const std::string& name : node_names) {
            auto it = nodes_.find(name);
            if (it != nodes_.end() && fitOf(findMisfit(it->second, req)) != Fit::kNever)
              by_free.push_back(&it->second);
          }
          std::sort(by_free.begin(), by_free.end(), [](const model::NodeState* a, const model::NodeState* b) {
            if (a->wholeFreeCount() != b->wholeFreeCount()) return a->wholeFreeCount() > b->wholeFreeCount();
            return a->info().name < b->info().name;
          });
          int capacity = 0;
          for (const model::NodeState* n : by_free) {
            if (capacity >= g.spec.min_member) break;
            g.drain_nodes.push_back(n->info().name);
            capacity += req.gpus > 0 ? n->gpuCount() / req.gpus : g.spec.min_member;
          }
        }
      }
      return failAll(reason, never, "gang");
    }
  }
  if (g.admitted) return filterSingleLocked(req, node_names, g.spec.key);

  // Steer the member to its slot: the one it already has, else a free slot on a candidate.
  const std::set<std::string> candidates(node_names.begin(), node_names.end());
  GangSlot* mine = nullptr;
  for (GangSlot& slot : g.slots) {
    if (slot.member_uid == pod.uid) mine = &slot;
  }
  if (mine && !candidates.count(mine->node) && !mine->bound) {
    mine->member_uid.clear();  // kube-scheduler no longer offers that node: pick another slot
    mine = nullptr;
  }
  if (!mine) {
    for (GangSlot& slot : g.slots) {
      if (slot.member_uid.empty() && !slot.bound && candidates.count(slot.node)) {
        slot.member_uid = pod.uid;
        mine = &slot;
        noticeLocked(GangNotice::Kind::kPlanned, pod.uid, pod.key(), g.spec.key,
                     planMessage(g.spec.key, g.slots, slot, g.spec.timeout));
        break;
      }
    }
  }
  if (!mine) {
    bool any_free = std::any_of(g.slots.begin(), g.slots.end(),
                                [](const GangSlot& s) { return s.member_uid.empty() && !s.bound; });
    if (any_free) {
      // Its free slots are on nodes this member cannot use: plan again next time.
      releasePlanLocked(g);
      return failAll(
          "troupe: gang " + g.spec.key + " was planned on nodes this member cannot use; re-planning", false,
          "gang");
    }
    return failAll("troupe: gang " + g.spec.key + " already has its " + std::to_string(g.spec.min_member) +
                       " members planned; extra members are placed once it runs",
                   false, "gang");
  }
  const NodeReasons::ReasonId elsewhere =
      out.unresolvable.intern("troupe: gang " + g.spec.key + " is placed on other nodes");
  for (const std::string& n : node_names) {
    if (n == mine->node) {
      out.passed.push_back(n);
    } else {
      out.unresolvable.add(n, elsewhere);
      ++out.categories["gang"];
    }
  }
  return out;
}

void Scheduler::bind(const std::string& pod_uid, const std::string& pod_ns, const std::string& pod_name,
                     const std::string& node, BindCallback done) {
  const std::optional<Pending> pending = pendingOf(pod_uid);
  if (!pending || pending->gang.empty()) {
    done(reserve(pod_uid, pod_ns, pod_name, node));
    return;
  }
  const std::string key = pod_ns + "/" + pod_name;
  std::vector<Completion> completions;
  std::vector<GangNotice> notices;
  {
    std::unique_lock lock(mu_);
    auto g_it = gangs_.find(pending->gang);
    if (auto held = pod_node_.find(pod_uid); held != pod_node_.end()) {
      // A retried bind of a member that was already released through the barrier.
      auto n = nodes_.find(held->second);
      if (held->second == node && n != nodes_.end()) {
        completions.emplace_back(std::move(done), *n->second.find(pod_uid));
      } else {
        completions.emplace_back(
            std::move(done), failedPrecondition("pod " + key + " already holds GPUs on node " + held->second +
                                                ", not " + node));
      }
    } else if (g_it == gangs_.end() || g_it->second.admitted) {
      Result<model::Allocation> a = reserveLocked(pod_uid, key, node, pending->request);
      if (a.isOk()) {
        a.value().gang = pending->gang;
        nodes_.at(node).remove(pod_uid);
        (void)nodes_.at(node).add(a.value());
      }
      completions.emplace_back(std::move(done), std::move(a));
    } else {
      Gang& g = g_it->second;
      GangSlot* slot = nullptr;
      for (GangSlot& s : g.slots) {
        if (s.member_uid == pod_uid) slot = &s;
      }
      if (!slot) {
        completions.emplace_back(
            std::move(done),
            failedPrecondition("gang member " + key + " has no planned place in gang " + g.spec.key +
                               " (its plan was released); it will be planned again"));
      } else if (slot->node != node) {
        completions.emplace_back(std::move(done),
                                 failedPrecondition("Troupe planned gang member " + key + " on node " +
                                                    slot->node + ", not " + node));
      } else {
        g.waiting.erase(std::remove_if(g.waiting.begin(), g.waiting.end(),
                                       [&](const Waiter& w) { return w.uid == pod_uid; }),
                        g.waiting.end());
        if (g.waiting.empty()) g.barrier_deadline = now() + g.spec.timeout;
        g.waiting.push_back(Waiter{pod_uid, key, node, std::move(done)});
        int bound = 0;
        for (const GangSlot& s : g.slots) bound += s.bound ? 1 : 0;
        const int missing = static_cast<int>(g.slots.size()) - static_cast<int>(g.waiting.size()) - bound;
        if (missing > 0) {
          noticeLocked(
              GangNotice::Kind::kWaiting, pod_uid, key, g.spec.key,
              "waiting at the bind barrier of gang " + g.spec.key + " for " + std::to_string(missing) +
                  " more of " + std::to_string(g.slots.size()) +
                  " members; all are bound together once they arrive, or all fail " +
                  std::to_string(
                      std::chrono::duration_cast<std::chrono::seconds>(g.barrier_deadline - now()).count()) +
                  "s from now (troupe.dev/gang-timeout)");
        } else {
          // Everyone is here: turn every hold into the member's own allocation, together.
          for (Waiter& w : g.waiting) {
            for (size_t i = 0; i < g.slots.size(); ++i) {
              GangSlot& s = g.slots[i];
              if (s.member_uid != w.uid) continue;
              model::NodeState& n = nodes_.at(s.node);
              n.remove(holdUid(g.spec.key, i));
              model::Allocation a;
              a.pod_uid = w.uid;
              a.pod_key = w.key;
              a.node = s.node;
              a.gpus = s.gpus;
              a.milli_per_gpu = g.request.milli_per_gpu;
              a.gang = g.spec.key;
              Status st = n.add(a);
              if (st.isOk()) {
                pod_node_[w.uid] = s.node;
                s.bound = true;
                completions.emplace_back(std::move(w.done), a);
              } else {
                completions.emplace_back(std::move(w.done), st);
              }
            }
          }
          g.waiting.clear();
          g.admitted = true;
          gang_events_.admit_seconds.push_back(seconds(now() - g.first_seen));
        }
      }
    }
    notices.swap(notices_);
  }
  notify(notices);
  for (Completion& c : completions) c.first(std::move(c.second));
}

void Scheduler::expireLocked(std::vector<Completion>* out) {
  const Clock::time_point t = now();
  for (auto it = gangs_.begin(); it != gangs_.end();) {
    Gang& g = it->second;
    if (!g.waiting.empty() && t >= g.barrier_deadline) {
      const std::string msg =
          "gang " + g.spec.key + ": only " + std::to_string(g.waiting.size()) + " of " +
          std::to_string(g.slots.size()) + " members reached bind within " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(g.spec.timeout).count()) +
          "s (troupe.dev/gang-timeout); all are released and the gang is planned again";
      for (Waiter& w : g.waiting) {
        noticeLocked(GangNotice::Kind::kTimedOut, w.uid, w.key, g.spec.key, msg);
        out->emplace_back(std::move(w.done), deadlineExceeded(msg));
      }
      g.waiting.clear();
      releasePlanLocked(g);
      g.last_reason = msg;
      ++gang_events_.timeouts;
    } else if (!g.admitted && !g.slots.empty() && g.waiting.empty() &&
               t - g.last_seen > std::max(g.spec.timeout, config_.gang_active_window)) {
      releasePlanLocked(g);  // planned, then abandoned: never keep GPUs for nobody
    }
    if (g.waiting.empty() && g.slots.empty() && t - g.last_seen > kForgetAfter) {
      it = gangs_.erase(it);
    } else if (g.admitted && t - g.last_seen > kForgetAfter) {
      it = gangs_.erase(it);
    } else {
      ++it;
    }
  }
}

void Scheduler::tick() {
  std::vector<Completion> completions;
  std::vector<GangNotice> notices;
  {
    std::unique_lock lock(mu_);
    if (gangs_.empty()) return;
    expireLocked(&completions);
    notices.swap(notices_);
  }
  notify(notices);
  for (Completion& c : completions) c.first(std::move(c.second));
}

void Scheduler::forgetPod(const std::string& pod_uid) {
  {
    std::lock_guard lock(pending_mu_);
    pending_.erase(pod_uid);
  }
  std::unique_lock lock(mu_);
  for (auto it = gangs_.begin(); it != gangs_.end();) {
    Gang& g = it->second;
    for (GangSlot& s : g.slots) {
      if (s.member_uid == pod_uid && !s.bound) s.member_uid.clear();
    }
    // Every pod of a gang that never ran is gone: it leaves the line and gives back its plan.
    if (g.members.erase(pod_uid) && g.members.empty() && !g.admitted && g.waiting.empty()) {
      releasePlanLocked(g);
      it = gangs_.erase(it);
    } else {
      ++it;
    }
  }
}

Scheduler::GangEvents Scheduler::drainGangEvents() {
  std::unique_lock lock(mu_);
  GangEvents out = std::move(gang_events_);
  gang_events_ = GangEvents{};
  return out;
}

}  // namespace troupe::sched
