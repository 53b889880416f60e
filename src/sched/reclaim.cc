#include "troupe/sched/reclaim.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "troupe/sched/gang_planner.h"
#include "troupe/sched/gpu_amount.h"
#include "troupe/sched/placement.h"

namespace troupe::sched {
namespace {

// Bounds the work of one call: candidates tried for a plan, and queue levels followed upwards
// (a cycle in the parents, which QueueTree rejects, cannot loop here either).
constexpr size_t kMaxCandidates = 64;
constexpr size_t kMaxDepth = 64;

using Queues = std::map<std::string, const QueueStatus*>;

int64_t guaranteedTotal(const QueueSpec& spec) {
  if (spec.guaranteed.milli) return *spec.guaranteed.milli;
  int64_t sum = 0;
  for (const auto& [product, milli] : spec.guaranteed.product_milli) sum += milli;
  return sum;
}

// The queue and its ancestors, nearest first; empty for a queue not in `queues`.
std::vector<std::string> lineage(const Queues& queues, const std::string& name) {
  std::vector<std::string> out;
  std::string at = name;
  while (!at.empty() && out.size() < kMaxDepth) {
    auto it = queues.find(at);
    if (it == queues.end()) break;
    out.push_back(at);
    at = it->second->spec.parent;
  }
  return out;
}

GpuRequest derivedRequest(const QueuedPod& pod) {
  GpuRequest req;
  if (pod.milli >= model::kMilliPerGpu && pod.milli % model::kMilliPerGpu == 0) {
    req.gpus = static_cast<int>(pod.milli / model::kMilliPerGpu);
  } else {
    req.gpus = 1;
    req.milli_per_gpu = pod.milli;
  }
  req.models = pod.models;
  return req;
}

GpuRequest requestOf(const ReclaimInput& input, const QueuedPod& pod) {
  if (input.request) {
    if (std::optional<GpuRequest> req = input.request(pod)) return *req;
  }
  return derivedRequest(pod);
}

// A waiting pod, or a waiting gang's pending members, that reclaim may make room for.
struct Waiting {
  std::string queue;
  std::string key;  // the pod's namespace/name, or the gang key
  bool gang = false;
  int members = 1;
  GpuRequest req;
  int64_t milli = 0;
  int64_t priority = 0;
  QueueClock::time_point since{};
};

// What is evicted together: a pod on its own, or every bound member of a gang.
struct Unit {
  std::string key;
  std::vector<const QueuedPod*> members;
  int64_t milli = 0;
  int64_t priority = 0;              // the highest of its members
  QueueClock::time_point started{};  // its last member's start
  std::set<std::string> nodes;
};

bool cheaper(const Unit& a, const Unit& b) {
  return std::tie(a.milli, a.priority, b.started, a.key) < std::tie(b.milli, b.priority, a.started, b.key);
}

// Milli-GPUs taken from each queue (and per product) by a set of units.
struct Taken {
  std::map<std::string, int64_t> total;
  std::map<std::string, std::map<std::string, int64_t>> by_product;
};

// The nodes with some units' members taken off: copies of the touched nodes, the rest as they
// are, in the input's order.
class Trial {
 public:
  Trial(const std::vector<const model::NodeState*>& base, const std::vector<const Unit*>& units) {
    std::map<std::string, const model::NodeState*> by_name;
    for (const model::NodeState* n : base) by_name.emplace(n->info().name, n);
    for (const Unit* u : units) {
      for (const QueuedPod* m : u->members) {
        auto it = by_name.find(m->node);
        if (it == by_name.end()) continue;
        auto [copy, fresh] = copies_.try_emplace(m->node, *it->second);
        copy->second.remove(m->uid);
        (void)fresh;
      }
    }
    view_.reserve(base.size());
    for (const model::NodeState* n : base) {
      auto it = copies_.find(n->info().name);
      view_.push_back(it == copies_.end() ? n : &it->second);
    }
  }
  const std::vector<const model::NodeState*>& nodes() const { return view_; }
  // Only the touched nodes can have gained room.
  std::vector<const model::NodeState*> touched() const {
    std::vector<const model::NodeState*> out;
    for (const auto& [name, node] : copies_) out.push_back(&node);
    return out;
  }

 private:
  std::map<std::string, model::NodeState> copies_;
  std::vector<const model::NodeState*> view_;
};

bool podFitsOn(const model::NodeState& node, const GpuRequest& req) {
  return !node.info().unschedulable && placeOnNode(node, req).has_value();
}

class Planner {
 public:
  explicit Planner(const ReclaimInput& input) : input_(input) {
    for (const QueueStatus& q : input.queues) {
      if (q.invalid.empty()) queues_.emplace(q.spec.name, &q);
    }
  }

  std::optional<ReclaimPlan> plan() {
    std::vector<Waiting> waiting = candidates();
    size_t tried = 0;
    for (const Waiting& w : waiting) {
      if (fitsNow(w)) continue;
      if (++tried > kMaxCandidates) break;
      std::vector<const Unit*> units = eligibleUnits(w);
      if (units.empty()) continue;
      std::optional<std::vector<const Unit*>> chosen = w.gang ? planForGang(w, units) : planForPod(w, units);
      if (chosen) return describe(w, *chosen);
    }
    return std::nullopt;
  }

 private:
  // Waiting pods and gangs in the order reclaim serves them (see reclaim.h).
  std::vector<Waiting> candidates() const {
    struct Below {
      const QueueStatus* q;
      int64_t guaranteed;
    };
    std::vector<Below> below;
    for (const auto& [name, q] : queues_) {
      int64_t g = guaranteedTotal(q->spec);
      if (g > 0 && q->allocated_milli < g) below.push_back({q, g});
    }
    std::sort(below.begin(), below.end(), [](const Below& a, const Below& b) {
      // The smaller held fraction, then the larger shortfall, then the name.
      const double fa = static_cast<double>(a.q->allocated_milli) / static_cast<double>(a.guaranteed);
      const double fb = static_cast<double>(b.q->allocated_milli) / static_cast<double>(b.guaranteed);
      if (fa != fb) return fa < fb;
      int64_t sa = a.guaranteed - a.q->allocated_milli, sb = b.guaranteed - b.q->allocated_milli;
      if (sa != sb) return sa > sb;
      return a.q->spec.name < b.q->spec.name;
    });

    std::vector<Waiting> out;
    for (const Below& under : below) {
      const std::string& queue = under.q->spec.name;
      const int64_t room = under.guaranteed - under.q->allocated_milli;
      std::map<std::string, std::vector<const QueuedPod*>> gangs;
      std::vector<Waiting> mine;
      for (const QueuedPod& p : input_.pods) {
        if (p.bound() || p.queue != queue || p.milli <= 0) continue;
        if (!p.gang.empty()) {
          gangs[p.gang].push_back(&p);
          continue;
        }
        Waiting w;
        w.queue = queue;
        w.key = p.key;
        w.req = requestOf(input_, p);
        w.milli = p.milli;
        w.priority = p.priority;
        w.since = p.since;
        mine.push_back(std::move(w));
      }
      for (auto& [key, members] : gangs) {
        std::sort(members.begin(), members.end(),
                  [](const QueuedPod* a, const QueuedPod* b) { return a->key < b->key; });
        Waiting w;
        w.queue = queue;
        w.key = key;
        w.gang = true;
        w.members = static_cast<int>(members.size());
        w.req = requestOf(input_, *members.front());
        w.since = members.front()->since;
        w.priority = members.front()->priority;
        for (const QueuedPod* m : members) {
          w.milli += m->milli;
          w.priority = std::max(w.priority, m->priority);
          w.since = std::min(w.since, m->since);
        }
        mine.push_back(std::move(w));
      }
      std::erase_if(mine, [&](const Waiting& w) { return w.milli > room || !w.req.wantsGpus(); });
      std::sort(mine.begin(), mine.end(), [](const Waiting& a, const Waiting& b) {
        return std::tie(b.priority, a.since, a.key) < std::tie(a.priority, b.since, b.key);
      });
      for (Waiting& w : mine) out.push_back(std::move(w));
    }
    return out;
  }

  bool fits(const Waiting& w, const std::vector<const model::NodeState*>& nodes) const {
    if (w.gang) return !planGang(nodes, w.req, w.members, w.key, input_.topology_levels).slots.empty();
    return std::any_of(nodes.begin(), nodes.end(),
                       [&](const model::NodeState* n) { return podFitsOn(*n, w.req); });
  }
  bool fitsNow(const Waiting& w) const { return fits(w, input_.nodes); }

  // Units that may be evicted for `w`, cheapest first.
  std::vector<const Unit*> eligibleUnits(const Waiting& w) {
    if (units_.empty()) buildUnits();
    std::vector<std::string> mine = lineage(queues_, w.queue);
    shared_ = std::set<std::string>(mine.begin(), mine.end());
    std::vector<const Unit*> out;
    for (const Unit& u : units_) {
      bool ok = std::all_of(u.members.begin(), u.members.end(), [&](const QueuedPod* m) {
        auto it = queues_.find(m->queue);
        if (it == queues_.end() || shared_.contains(m->queue)) return false;
        const QueueStatus& q = *it->second;
        return q.spec.preemptible && q.allocated_milli > q.fair_share.total_milli &&
               input_.now - m->since >= input_.min_runtime && !input_.spared.contains(m->uid);
      });
      if (ok) out.push_back(&u);
    }
    return out;
  }

  void buildUnits() {
    std::map<std::string, Unit> by_key;
    for (const QueuedPod& p : input_.pods) {
      if (!p.bound()) continue;
      const std::string key = p.gang.empty() ? "pod " + p.key : "gang " + p.gang;
      Unit& u = by_key[key];
      u.key = p.gang.empty() ? p.key : p.gang;
      if (u.members.empty()) {
        u.priority = p.priority;
        u.started = p.since;
      }
      u.members.push_back(&p);
      u.milli += p.milli;
      u.priority = std::max(u.priority, p.priority);
      u.started = std::max(u.started, p.since);
      u.nodes.insert(p.node);
    }
    for (auto& [key, u] : by_key) {
      std::sort(u.members.begin(), u.members.end(),
                [](const QueuedPod* a, const QueuedPod* b) { return a->key < b->key; });
      units_.push_back(std::move(u));
    }
    std::sort(units_.begin(), units_.end(), cheaper);
  }

  // Whether `taken` plus `unit` leaves every queue it touches (outside the waiting queue's
  // lineage) its guarantee; if so, adds it.
  bool take(Taken& taken, const Unit& unit) const {
    Taken next = taken;
    for (const QueuedPod* m : unit.members) {
      for (const std::string& q : lineage(queues_, m->queue)) {
        if (shared_.contains(q)) break;
        next.total[q] += m->milli;
        next.by_product[q][m->product] += m->milli;
      }
    }
    for (const auto& [name, milli] : next.total) {
      const QueueStatus& q = *queues_.at(name);
      const GpuQuota& g = q.spec.guaranteed;
      if (g.milli && q.allocated_milli - milli < *g.milli) return false;
      for (const auto& [product, amount] : g.product_milli) {
        auto held = q.allocated.find(product);
        const int64_t has = held == q.allocated.end() ? 0 : held->second;
        const auto& took = next.by_product[name];
        auto t = took.find(product);
        if (t != took.end() && has - t->second < amount) return false;
      }
    }
    taken = std::move(next);
    return true;
  }

  // Drops units, the costliest first, while `w` still fits without them. Fewer victims never
  // free more room, so a unit kept here stays needed after later ones are dropped.
  std::vector<const Unit*> prune(const Waiting& w, std::vector<const Unit*> chosen) const {
    for (size_t i = chosen.size(); i-- > 0;) {
      std::vector<const Unit*> without = chosen;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
      Trial t(input_.nodes, without);
      if (fits(w, w.gang ? t.nodes() : t.touched())) chosen = std::move(without);
    }
    return chosen;
  }

  struct Cost {
    int64_t milli = 0;
    int64_t priority = 0;
    QueueClock::time_point earliest{};
    size_t pods = 0;
    std::vector<std::string> keys;
  };
  static Cost costOf(const std::vector<const Unit*>& units) {
    Cost c;
    bool first = true;
    for (const Unit* u : units) {
      c.milli += u->milli;
      c.pods += u->members.size();
      c.keys.push_back(u->key);
      for (const QueuedPod* m : u->members) {
        c.priority = first ? m->priority : std::max(c.priority, m->priority);
        c.earliest = first ? m->since : std::min(c.earliest, m->since);
        first = false;
      }
    }
    std::sort(c.keys.begin(), c.keys.end());
    return c;
  }
  static bool cheaperSet(const Cost& a, const Cost& b) {
    return std::tie(a.milli, a.priority, b.earliest, a.pods, a.keys) <
           std::tie(b.milli, b.priority, a.earliest, b.pods, b.keys);
  }

  // A pod: per node, the units there in cost order until it fits on that node; the cheapest.
  std::optional<std::vector<const Unit*>> planForPod(const Waiting& w,
                                                     const std::vector<const Unit*>& units) {
    std::optional<std::vector<const Unit*>> best;
    Cost best_cost;
    // Only a node with a victim on it can gain room.
    std::set<std::string> with_victims;
    for (const Unit* u : units) with_victims.insert(u->nodes.begin(), u->nodes.end());
    for (const model::NodeState* node : input_.nodes) {
      const std::string& name = node->info().name;
      if (!with_victims.contains(name)) continue;
      if (node->info().unschedulable || fitOf(findMisfit(*node, w.req)) == Fit::kNever) continue;
      model::NodeState trial = *node;
      std::vector<const Unit*> chosen;
      Taken taken;
      bool fit = false;
      for (const Unit* u : units) {
        if (!u->nodes.contains(name) || !take(taken, *u)) continue;
        chosen.push_back(u);
        for (const QueuedPod* m : u->members) {
          if (m->node == name) trial.remove(m->uid);
        }
        if (podFitsOn(trial, w.req)) {
          fit = true;
          break;
        }
      }
      if (!fit) continue;
      chosen = prune(w, std::move(chosen));
      Cost cost = costOf(chosen);
      if (!best || cheaperSet(cost, best_cost)) {
        best = std::move(chosen);
        best_cost = std::move(cost);
      }
    }
    return best;
  }

  // A gang: units from anywhere in cost order until planGang places every member.
  std::optional<std::vector<const Unit*>> planForGang(const Waiting& w,
                                                      const std::vector<const Unit*>& units) {
    int64_t free_now = 0;
    for (const model::NodeState* n : input_.nodes) {
      if (!n->info().unschedulable) free_now += n->freeMilliTotal();
    }
    std::vector<const Unit*> chosen;
    Taken taken;
    int64_t freed = 0;
    for (const Unit* u : units) {
      if (!take(taken, *u)) continue;
      chosen.push_back(u);
      freed += u->milli;
      if (free_now + freed < w.milli) continue;  // cannot fit yet: spare the gang planner
      Trial t(input_.nodes, chosen);
      if (fits(w, t.nodes())) return prune(w, std::move(chosen));
    }
    return std::nullopt;
  }

  ReclaimPlan describe(const Waiting& w, const std::vector<const Unit*>& chosen) const {
    ReclaimPlan plan;
    plan.queue = w.queue;
    plan.for_key = w.key;
    std::map<std::string, std::pair<int64_t, int>> by_queue;  // queue -> (milli, pods)
    for (const Unit* u : chosen) {
      for (const QueuedPod* m : u->members) {
        plan.victims.push_back({m->uid, m->key, m->queue, m->gang, m->node, m->milli, m->priority});
        plan.freed_milli += m->milli;
        by_queue[m->queue].first += m->milli;
        ++by_queue[m->queue].second;
      }
    }
    std::sort(plan.victims.begin(), plan.victims.end(),
              [](const ReclaimVictim& a, const ReclaimVictim& b) { return a.key < b.key; });

    const QueueStatus& mine = *queues_.at(w.queue);
    std::string reason = "troupe: reclaimed for queue " + w.queue + " (holds " +
                         gpusText(mine.allocated_milli) + " of " + gpusText(guaranteedTotal(mine.spec)) +
                         " guaranteed GPUs) so that ";
    if (w.gang) {
      reason += "gang " + w.key + " (" + std::to_string(w.members) + " pods, " + gpusText(w.milli) + " GPUs)";
    } else {
      reason += "pod " + w.key + " (" + gpusText(w.milli) + " GPUs)";
    }
    reason += " fits: ";
    bool first = true;
    for (const auto& [name, took] : by_queue) {
      const QueueStatus& q = *queues_.at(name);
      if (!first) reason += "; ";
      first = false;
      reason += "queue " + name + " holds " + gpusText(q.allocated_milli) +
                " GPUs, above its fair share of " + gpusText(q.fair_share.total_milli) + ", and gives up " +
                gpusText(took.first) + " (" + std::to_string(took.second) +
                (took.second == 1 ? " pod)" : " pods)");
    }
    plan.reason = std::move(reason);
    return plan;
  }

  const ReclaimInput& input_;
  Queues queues_;
  std::vector<Unit> units_;
  std::set<std::string> shared_;  // the waiting queue's lineage, while planning for it
};

}  // namespace

std::optional<ReclaimPlan> planReclaim(const ReclaimInput& input) { return Planner(input).plan(); }

}  // namespace troupe::sched
