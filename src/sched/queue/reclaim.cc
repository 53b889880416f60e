#include "troupe/sched/queue/reclaim.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

#include "troupe/sched/cluster/gpu_amount.h"
#include "troupe/sched/gang/gang_planner.h"
#include "troupe/sched/score/placement.h"

namespace troupe::sched {
namespace {

// Bounds the work of one call: candidates of a round that no plan could make fit, and queue
// levels followed upwards (a cycle in the parents, which QueueTree rejects, cannot loop here).
constexpr size_t kMaxMisses = 64;
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
  std::vector<const QueuedPod*> pods;  // the pod, or the gang's pending members by key
  std::string key;                     // the pod's namespace/name, or the gang key
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

 private:
  std::map<std::string, model::NodeState> copies_;
  std::vector<const model::NodeState*> view_;
};

bool podFitsOn(const model::NodeState& node, const GpuRequest& req) {
  return !node.info().unschedulable && placeOnNode(node, req).has_value();
}

// The nodes as a round changes them: the input's nodes, with a copy in place of each one the
// round took victims off or placed a waiting pod on. Every change is logged, so what was
// remembered per node can be brought up to date by planning the changed nodes again.
class RoundNodes {
 public:
  explicit RoundNodes(const std::vector<const model::NodeState*>& base) : view_(base) {
    for (size_t i = 0; i < base.size(); ++i) index_.emplace(base[i]->info().name, i);
  }
  const std::vector<const model::NodeState*>& view() const { return view_; }
  const model::NodeState& at(size_t i) const { return *view_[i]; }
  std::optional<size_t> indexOf(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }
  model::NodeState& touch(size_t i) {
    auto [it, fresh] = copies_.try_emplace(i, *view_[i]);
    if (fresh) view_[i] = &it->second;
    changed_.push_back(i);
    return it->second;
  }
  const std::vector<size_t>& changed() const { return changed_; }

 private:
  std::vector<const model::NodeState*> view_;
  std::map<std::string, size_t> index_;
  std::map<size_t, model::NodeState> copies_;  // std::map: stable addresses for view_
  std::vector<size_t> changed_;
};

struct Cost {
  int64_t milli = 0;
  int64_t priority = 0;
  QueueClock::time_point earliest{};
  size_t pods = 0;
  std::vector<std::string> keys;
};
bool cheaperSet(const Cost& a, const Cost& b) {
  return std::tie(a.milli, a.priority, b.earliest, a.pods, a.keys) <
         std::tie(b.milli, b.priority, a.earliest, b.pods, b.keys);
}

class Planner {
 public:
  explicit Planner(const ReclaimInput& input) : input_(input) {
    for (const QueueStatus& q : input.queues) {
      if (q.invalid.empty()) queues_.emplace(q.spec.name, &q);
    }
  }

  std::optional<ReclaimPlan> plan() {
    for (QueueWaiting& q : candidates()) {
      if (std::optional<ReclaimPlan> p = planRound(q)) return p;
    }
    return std::nullopt;
  }

 private:
  struct QueueWaiting {
    const QueueStatus* q = nullptr;
    int64_t room = 0;  // guarantee less what it holds
    std::vector<Waiting> waiting;
  };

  // Waiting queues and their pods and gangs in the order reclaim serves them (see reclaim.h).
  std::vector<QueueWaiting> candidates() const {
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

    std::vector<QueueWaiting> out;
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
        w.pods = {&p};
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
        w.pods = members;
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
      if (!mine.empty()) out.push_back({under.q, room, std::move(mine)});
    }
    return out;
  }

  // --- one round ------------------------------------------------------------------------------

  // Per waiting request: the nodes it fits on now and a lazy heap of per-node plans, brought up
  // to date from the round's change log when next used.
  struct Option {
    Cost cost;
    size_t node = 0;
    std::vector<const Unit*> units;
  };
  struct OptionAfter {
    bool operator()(const Option& a, const Option& b) const { return cheaperSet(b.cost, a.cost); }
  };
  struct PerRequest {
    GpuRequest req;
    bool built = false;
    size_t seen = 0;        // entries of the change log applied
    std::set<size_t> fits;  // nodes it fits on as the round left them
    std::priority_queue<Option, std::vector<Option>, OptionAfter> options;
  };

  std::optional<ReclaimPlan> planRound(QueueWaiting& qw) {
    std::vector<std::string> mine = lineage(queues_, qw.q->spec.name);
    shared_ = std::set<std::string>(mine.begin(), mine.end());
    if (units_.empty()) buildUnits();
    round_.emplace(input_.nodes);
    taken_ = Taken{};
    used_.clear();
    per_request_.clear();
    placed_.clear();
    eligible_.clear();
    at_node_.assign(input_.nodes.size(), {});
    for (const Unit& u : units_) {
      if (!eligible(u)) continue;
      eligible_.push_back(&u);
      for (const std::string& node : u.nodes) {
        if (std::optional<size_t> i = round_->indexOf(node)) at_node_[*i].push_back(&u);
      }
    }
    if (eligible_.empty()) return std::nullopt;

    std::vector<ReclaimServed> served;
    std::vector<const Unit*> victims;
    int64_t left = qw.room;
    size_t misses = 0;
    for (const Waiting& w : qw.waiting) {
      if (left <= 0) break;
      if (w.milli > left) continue;
      served_index_ = served.size();
      ReclaimServed s;
      s.key = w.key;
      s.gang = w.gang;
      s.milli = w.milli;
      std::vector<const Unit*> chosen;
      bool placed =
          w.gang ? serveGang(w, s, chosen, misses < kMaxMisses) : servePod(w, s, chosen, misses < kMaxMisses);
      if (!placed) {
        ++misses;
        continue;
      }
      s.evicts = !chosen.empty();
      victims.insert(victims.end(), chosen.begin(), chosen.end());
      left -= w.milli;
      served.push_back(std::move(s));
    }
    if (victims.empty()) return std::nullopt;
    dropUnneeded(victims, served);
    return describe(*qw.q, served, victims);
  }

  // A unit taken for one pod may be spared once later pods are placed: two 1-GPU pods served
  // one after the other may each have taken a unit when one 2-GPU unit would do for both. So
  // each unit, the costliest first, is given back (its members on their GPUs again) if the pods
  // placed on its nodes can be placed again in the round's room (a gang's member on its node).
  void dropUnneeded(std::vector<const Unit*>& victims, std::vector<ReclaimServed>& served) {
    std::vector<const Unit*> order = victims;
    std::sort(order.begin(), order.end(), [](const Unit* a, const Unit* b) { return cheaper(*b, *a); });
    std::set<const Unit*> dropped;
    std::map<size_t, std::set<size_t>> on_node;  // node index -> placed_ indices
    for (size_t k = 0; k < placed_.size(); ++k) on_node[placed_[k].node].insert(k);
    for (const Unit* u : order) {
      std::map<size_t, model::NodeState> trial;  // node index -> the round's node, changed
      for (const std::string& name : u->nodes) {
        if (std::optional<size_t> i = round_->indexOf(name)) trial.emplace(*i, round_->at(*i));
      }
      std::vector<size_t> displaced;
      bool ok = true;
      for (auto& [i, node] : trial) {
        for (size_t k : on_node[i]) {
          displaced.push_back(k);
          node.remove(placed_[k].pod->uid);
        }
      }
      // A gang's member may only go back to its own node (its gang's placement stays as
      // planned): placed first, then the pods on their own anywhere.
      std::stable_partition(displaced.begin(), displaced.end(), [&](size_t k) { return placed_[k].gang; });
      for (const QueuedPod* m : u->members) {
        std::optional<size_t> i = round_->indexOf(m->node);
        const model::Allocation* a = i ? input_.nodes[*i]->find(m->uid) : nullptr;
        ok = ok && a && trial.at(*i).add(*a).isOk();
      }
      std::map<size_t, size_t> moved;  // placed_ index -> its new node
      for (size_t k : displaced) {
        if (!ok) break;
        const Placed& p = placed_[k];
        bool fit = false;
        if (p.gang) {
          ok = placeInto(trial.at(p.node), *p.pod, p.req);
          continue;
        }
        for (auto& [i, node] : trial) {
          if (placeInto(node, *p.pod, p.req)) {
            moved[k] = i;
            fit = true;
            break;
          }
        }
        if (!fit) {
          for (size_t i : perRequest(p.req).fits) {
            if (trial.contains(i)) continue;
            model::NodeState& node = trial.emplace(i, round_->at(i)).first->second;
            if (placeInto(node, *p.pod, p.req)) {
              moved[k] = i;
              fit = true;
              break;
            }
          }
        }
        ok = fit;
      }
      if (!ok) continue;
      for (auto& [i, node] : trial) round_->touch(i) = std::move(node);
      for (const auto& [k, i] : moved) {
        on_node[placed_[k].node].erase(k);
        on_node[i].insert(k);
        placed_[k].node = i;
        served[placed_[k].served].nodes[placed_[k].member] = round_->at(i).info().name;
      }
      dropped.insert(u);
    }
    std::erase_if(victims, [&](const Unit* u) { return dropped.contains(u); });
  }

  // Static rules for a unit to be a victim for the waiting queue (the round's rules: take()).
  bool eligible(const Unit& u) const {
    return std::all_of(u.members.begin(), u.members.end(), [&](const QueuedPod* m) {
      auto it = queues_.find(m->queue);
      if (it == queues_.end() || shared_.contains(m->queue)) return false;
      const QueueStatus& q = *it->second;
      return q.spec.preemptible && q.allocated_milli > q.fair_share.total_milli &&
             input_.now - m->since >= input_.min_runtime && !input_.spared.contains(m->uid);
    });
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
  // lineage) its guarantee, and each member's queue was above its fair share before; if so,
  // adds it.
  bool take(Taken& taken, const Unit& unit) const {
    if (used_.contains(&unit)) return false;
    for (const QueuedPod* m : unit.members) {
      const QueueStatus& q = *queues_.at(m->queue);
      auto t = taken.total.find(m->queue);
      const int64_t took = t == taken.total.end() ? 0 : t->second;
      if (q.allocated_milli - took <= q.fair_share.total_milli) return false;
    }
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
  static bool sameCost(const Cost& a, const Cost& b) { return !cheaperSet(a, b) && !cheaperSet(b, a); }

  // The round takes `chosen`: off the nodes, into taken_ and used_.
  void apply(const std::vector<const Unit*>& chosen) {
    for (const Unit* u : chosen) {
      const bool ok = take(taken_, *u);
      (void)ok;  // planned against taken_ as it is: cannot fail
      used_.insert(u);
      for (const QueuedPod* m : u->members) {
        if (std::optional<size_t> i = round_->indexOf(m->node)) round_->touch(*i).remove(m->uid);
      }
    }
  }

  static bool placeInto(model::NodeState& node, const QueuedPod& pod, const GpuRequest& req) {
    std::optional<Placement> p = placeOnNode(node, req);
    if (!p) return false;
    model::Allocation a;
    a.pod_uid = pod.uid;
    a.pod_key = pod.key;
    a.node = node.info().name;
    a.gpus = p->gpus;
    a.unknown_gpus = p->dra_gpus;
    a.milli_per_gpu = req.milli_per_gpu;
    return node.add(a).isOk();
  }

  // Places a waiting pod on node i of the round (it fits there).
  void reserve(size_t i, const QueuedPod& pod, const GpuRequest& req, ReclaimServed& s) {
    model::NodeState& node = round_->touch(i);
    (void)placeInto(node, pod, req);
    placed_.push_back({served_index_, s.uids.size(), i, req, &pod, false});
    s.uids.push_back(pod.uid);
    s.nodes.push_back(node.info().name);
  }

  // --- a waiting pod --------------------------------------------------------------------------

  // On node i as the round left it: the units there in cost order until the pod fits, then
  // each, the costliest first, dropped again while it still fits without it.
  std::optional<Option> optionFor(size_t i, const GpuRequest& req) const {
    const model::NodeState& base = round_->at(i);
    if (at_node_[i].empty() || base.info().unschedulable || fitOf(findMisfit(base, req)) == Fit::kNever) {
      return std::nullopt;
    }
    const std::string& name = base.info().name;
    auto without = [&](const std::vector<const Unit*>& units) {
      model::NodeState trial = base;
      for (const Unit* u : units) {
        for (const QueuedPod* m : u->members) {
          if (m->node == name) trial.remove(m->uid);
        }
      }
      return trial;
    };
    model::NodeState trial = base;
    std::vector<const Unit*> chosen;
    Taken taken = taken_;
    bool fit = false;
    for (const Unit* u : at_node_[i]) {
      if (!take(taken, *u)) continue;
      chosen.push_back(u);
      for (const QueuedPod* m : u->members) {
        if (m->node == name) trial.remove(m->uid);
      }
      if (podFitsOn(trial, req)) {
        fit = true;
        break;
      }
    }
    if (!fit) return std::nullopt;
    for (size_t k = chosen.size(); k-- > 0;) {
      std::vector<const Unit*> fewer = chosen;
      fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(k));
      if (podFitsOn(without(fewer), req)) chosen = std::move(fewer);
    }
    Option o;
    o.cost = costOf(chosen);
    o.node = i;
    o.units = std::move(chosen);
    return o;
  }

  PerRequest& perRequest(const GpuRequest& req) {
    auto it = std::find_if(per_request_.begin(), per_request_.end(),
                           [&](const PerRequest& r) { return r.req == req; });
    if (it == per_request_.end()) {
      per_request_.emplace_back();
      per_request_.back().req = req;
      it = std::prev(per_request_.end());
    }
    PerRequest& r = *it;
    auto plan_node = [&](size_t i) {
      if (podFitsOn(round_->at(i), req)) {
        r.fits.insert(i);
      } else {
        r.fits.erase(i);
      }
      if (std::optional<Option> o = optionFor(i, req)) r.options.push(std::move(*o));
    };
    if (!r.built) {
      r.built = true;
      for (size_t i = 0; i < round_->view().size(); ++i) plan_node(i);
      r.seen = round_->changed().size();
    }
    const std::vector<size_t>& log = round_->changed();
    std::set<size_t> again(log.begin() + static_cast<std::ptrdiff_t>(r.seen), log.end());
    for (size_t i : again) plan_node(i);
    r.seen = log.size();
    return r;
  }

  bool servePod(const Waiting& w, ReclaimServed& s, std::vector<const Unit*>& chosen, bool may_evict) {
    PerRequest& r = perRequest(w.req);
    if (!r.fits.empty()) {
      reserve(*r.fits.begin(), *w.pods.front(), w.req, s);
      return true;
    }
    if (!may_evict) return false;
    // The cheapest per-node plan; one planned before the round took units from its queues may
    // cost more now (never less), so it is planned again and kept only if unchanged.
    while (!r.options.empty()) {
      Option top = r.options.top();
      r.options.pop();
      std::optional<Option> now = optionFor(top.node, w.req);
      if (!now) continue;
      if (!sameCost(now->cost, top.cost)) {
        r.options.push(std::move(*now));
        continue;
      }
      chosen = std::move(now->units);
      apply(chosen);
      reserve(top.node, *w.pods.front(), w.req, s);
      return true;
    }
    return false;
  }

  // --- a waiting gang -------------------------------------------------------------------------

  bool gangFits(const Waiting& w, const std::vector<const model::NodeState*>& nodes) const {
    return !planGang(nodes, w.req, w.members, w.key, input_.topology_levels).slots.empty();
  }

  // Units from anywhere in cost order until planGang places every member; then each, the
  // costliest first, dropped again while the gang still fits without it.
  bool serveGang(const Waiting& w, ReclaimServed& s, std::vector<const Unit*>& chosen, bool may_evict) {
    if (!gangFits(w, round_->view())) {
      if (!may_evict) return false;
      int64_t free_now = 0;
      for (const model::NodeState* n : round_->view()) {
        if (!n->info().unschedulable) free_now += n->freeMilliTotal();
      }
      Taken taken = taken_;
      int64_t freed = 0;
      bool fit = false;
      for (const Unit* u : eligible_) {
        if (!take(taken, *u)) continue;
        chosen.push_back(u);
        freed += u->milli;
        if (free_now + freed < w.milli) continue;  // cannot fit yet: spare the gang planner
        if (gangFits(w, Trial(round_->view(), chosen).nodes())) {
          fit = true;
          break;
        }
      }
      if (!fit) {
        chosen.clear();
        return false;
      }
      for (size_t k = chosen.size(); k-- > 0;) {
        std::vector<const Unit*> fewer = chosen;
        fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(k));
        if (gangFits(w, Trial(round_->view(), fewer).nodes())) chosen = std::move(fewer);
      }
      apply(chosen);
    }
    GangPlanResult placed = planGang(round_->view(), w.req, w.members, w.key, input_.topology_levels);
    for (size_t k = 0; k < placed.slots.size() && k < w.pods.size(); ++k) {
      const GangSlot& slot = placed.slots[k];
      std::optional<size_t> i = round_->indexOf(slot.node);
      if (!i) continue;
      model::NodeState& node = round_->touch(*i);
      model::Allocation a;
      a.pod_uid = w.pods[k]->uid;
      a.pod_key = w.pods[k]->key;
      a.node = slot.node;
      a.gpus = slot.gpus;
      a.unknown_gpus = slot.dra_gpus;
      a.milli_per_gpu = w.req.milli_per_gpu;
      a.gang = w.key;
      (void)node.add(a);
      placed_.push_back({served_index_, s.uids.size(), *i, w.req, w.pods[k], true});
      s.uids.push_back(w.pods[k]->uid);
      s.nodes.push_back(slot.node);
    }
    return true;
  }

  ReclaimPlan describe(const QueueStatus& mine, const std::vector<ReclaimServed>& served,
                       const std::vector<const Unit*>& chosen) const {
    ReclaimPlan plan;
    plan.queue = mine.spec.name;
    plan.held_milli = mine.allocated_milli;
    plan.served = served;
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

    const ReclaimServed* first = nullptr;
    int64_t more_milli = 0;
    int more = 0;
    for (const ReclaimServed& s : served) {
      if (!s.evicts) continue;
      if (!first) {
        first = &s;
        continue;
      }
      ++more;
      more_milli += s.milli;
    }
    plan.for_key = first->key;
    std::string reason = "troupe: reclaimed for queue " + plan.queue + " (holds " +
                         gpusText(mine.allocated_milli) + " of " + gpusText(guaranteedTotal(mine.spec)) +
                         " guaranteed GPUs) so that ";
    if (first->gang) {
      reason += "gang " + first->key + " (" + std::to_string(first->uids.size()) + " pods, " +
                gpusText(first->milli) + " GPUs)";
    } else {
      reason += "pod " + first->key + " (" + gpusText(first->milli) + " GPUs)";
    }
    if (more > 0) {
      reason += " and " + std::to_string(more) +
                (more == 1 ? " more pod or gang (" : " more pods or gangs (") + gpusText(more_milli) +
                " GPUs) fit: ";
    } else {
      reason += " fits: ";
    }
    bool first_queue = true;
    for (const auto& [name, took] : by_queue) {
      const QueueStatus& q = *queues_.at(name);
      if (!first_queue) reason += "; ";
      first_queue = false;
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
  // The round in progress.
  std::optional<RoundNodes> round_;
  Taken taken_;
  std::set<const Unit*> used_;
  std::vector<const Unit*> eligible_;              // cost order
  std::vector<std::vector<const Unit*>> at_node_;  // per node index, cost order
  std::deque<PerRequest> per_request_;             // deque: stable while a reference is held
  // Where the round placed each waiting pod: served[served].nodes[member] is its node.
  struct Placed {
    size_t served = 0;
    size_t member = 0;
    size_t node = 0;
    GpuRequest req;
    const QueuedPod* pod = nullptr;
    bool gang = false;
  };
  std::vector<Placed> placed_;
  size_t served_index_ = 0;
};

}  // namespace

std::optional<ReclaimPlan> planReclaim(const ReclaimInput& input) { return Planner(input).plan(); }

}  // namespace troupe::sched
