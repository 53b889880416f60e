// A model-based randomized test of the gang core. A small "API" (pods that exist or not, bound
// or not, nodes) is driven through random interleavings of what happens to gangs in real life:
// members created, filtered and bound in any order, some or all deleted, gangs re-created under
// used names, kube-scheduler's late filters and binds for pods already deleted, nodes added and
// removed, Troupe restarted (its state rebuilt from what the API shows), and the clock moved past
// barrier timeouts and the starvation threshold. After every step the Scheduler is checked
// against the model:
//   - all or nothing: a gang member is only ever bound when, right after, the gang's live bound
//     members reach its minimum (a release of the barrier, or a member beyond the minimum);
//   - the GPUs the Scheduler counts on each node are exactly the live bound pods' plus the holds
//     of live plans, and no GPU is given twice;
//   - every gang member Troupe tracks is a live pod; plans, held GPUs, drained nodes and parked
//     binds exist only for gangs with a live unbound member;
//   - a gang incarnation never spans two of the model's incarnations (a name re-used after all
//     its pods were gone is a new gang);
// and, at random points and at the end, liveness: once the cluster is quiet (every pending pod
// filtered and bound round after round, no time passing), every gang whose missing members fit
// the free capacity is admitted.
//
// A failing seed is shrunk to a short list of steps and printed. TROUPE_GANG_MODEL_SEEDS and
// TROUPE_GANG_MODEL_STEPS raise the budget for a long soak (docs/gang-lifecycle.md).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "support/fixtures.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;

namespace {

using std::chrono::milliseconds;

constexpr const char* kRackLabel = "troupe.dev/rack";
constexpr auto kDefaultTimeout = std::chrono::seconds(30);
constexpr auto kMaxTimeout = std::chrono::seconds(60);

// One thing that happens, with every choice made: replaying a list of actions is deterministic,
// and an action that no longer applies (its pod does not exist in a shortened list) is skipped.
struct Action {
  enum class Kind {
    kCreate,      // a pod is created (gang member or single)
    kFilter,      // kube-scheduler filters a live pod against `nodes`
    kBind,        // kube-scheduler binds a live pod to the node its last filter passed
    kDelete,      // a pod is deleted
    kLateFilter,  // kube-scheduler's filter of a pod deleted a moment ago
    kLateBind,    // kube-scheduler's bind of a pod deleted a moment ago
    kAddNode,
    kRemoveNode,  // the node's pods are deleted with it
    kAdvance,     // time passes; then tick()
    kRestart,     // Troupe restarts: its state is rebuilt from the API
    kSettle,      // quiet cluster: liveness check
  };
  Kind kind = Kind::kAdvance;
  std::string pod;  // model pod id
  // kCreate
  std::string gang;  // "" for a single pod
  int size = 0, gpus = 1, timeout_s = 30;
  int64_t priority = 0;
  bool rack_required = false;
  // kFilter: candidate nodes; kAddNode/kRemoveNode: the node
  std::vector<std::string> nodes;
  int node_gpus = 8;
  std::string rack;
  int64_t ms = 0;

  std::string describe() const {
    std::ostringstream o;
    switch (kind) {
      case Kind::kCreate:
        o << "create " << pod;
        if (!gang.empty()) {
          o << " in gang " << gang << " (size " << size << ", timeout " << timeout_s << "s, priority "
            << priority << (rack_required ? ", one rack" : "") << ")";
        }
        o << ", " << gpus << " GPU(s)";
        break;
      case Kind::kFilter:
        o << "filter " << pod << " on";
        for (const std::string& n : nodes) o << " " << n;
        break;
      case Kind::kBind: o << "bind " << pod; break;
      case Kind::kDelete: o << "delete " << pod; break;
      case Kind::kLateFilter: o << "late filter of deleted " << pod; break;
      case Kind::kLateBind: o << "late bind of deleted " << pod; break;
      case Kind::kAddNode:
        o << "add node " << nodes.at(0) << " (" << node_gpus << " GPUs, " << rack << ")";
        break;
      case Kind::kRemoveNode: o << "remove node " << nodes.at(0); break;
      case Kind::kAdvance: o << "advance " << ms << " ms and tick"; break;
      case Kind::kRestart: o << "restart Troupe"; break;
      case Kind::kSettle: o << "settle (liveness)"; break;
    }
    return o.str();
  }
};

struct ModelPod {
  std::string id, uid, gang;
  int size = 0, gpus = 1, timeout_s = 30;
  int64_t priority = 0;
  bool rack_required = false;
  uint64_t model_incarnation = 0;  // of its gang, in the model
  uint64_t created = 0;            // order of creation
  bool live = true;
  bool deleted_since_restart = false;
  bool bound = false;
  std::string node;
  std::vector<int> gpu_set;
  std::string passed;   // the node its last filter passed, "" for none
  bool parked = false;  // a bind is in flight (its callback has not come)
};

struct ModelNode {
  int gpus = 8;
  std::string rack;
};

// The model and the Scheduler under test, stepped by Actions.
class World {
 public:
  World() { start(); }

  // Applies one action; returns a violation, if the Scheduler broke an invariant.
  std::optional<std::string> apply(const Action& a) {
    bound_now_.clear();
    switch (a.kind) {
      case Action::Kind::kCreate: create(a); break;
      case Action::Kind::kFilter: filter(a.pod, a.nodes); break;
      case Action::Kind::kBind: bind(a.pod); break;
      case Action::Kind::kDelete: deletePod(a.pod); break;
      case Action::Kind::kLateFilter: {
        auto it = pods_.find(a.pod);
        if (it == pods_.end() || it->second.live || !it->second.deleted_since_restart) break;
        FilterResult r = scheduler_->filter(facts(it->second), nodeNames());
        if (!r.passed.empty()) return "a filter of deleted pod " + a.pod + " passed node " + r.passed[0];
        break;
      }
      case Action::Kind::kLateBind: {
        auto it = pods_.find(a.pod);
        if (it == pods_.end() || it->second.live || !it->second.deleted_since_restart ||
            it->second.passed.empty())
          break;
        bindCall(it->second);
        break;
      }
      case Action::Kind::kAddNode: addNode(a.nodes.at(0), a.node_gpus, a.rack); break;
      case Action::Kind::kRemoveNode: removeNode(a.nodes.at(0)); break;
      case Action::Kind::kAdvance:
        clock_ += milliseconds(a.ms);
        scheduler_->tick();
        break;
      case Action::Kind::kRestart: restart(); break;
      case Action::Kind::kSettle:
        if (auto v = settle()) return v;
        break;
    }
    if (!violation_.empty()) return violation_;
    return check();
  }

  // ---- what the generator reads -------------------------------------------------------------
  const std::map<std::string, ModelPod>& pods() const { return pods_; }
  const std::map<std::string, ModelNode>& nodes() const { return nodes_; }
  std::vector<std::string> nodeNames() const {
    std::vector<std::string> out;
    for (const auto& [name, n] : nodes_) out.push_back(name);
    return out;
  }
  // The gang's live pods' shape, when it has any (a new pod of the gang must share it).
  const ModelPod* liveMember(const std::string& gang) const {
    for (const auto& [id, p] : pods_) {
      if (p.live && p.gang == gang) return &p;
    }
    return nullptr;
  }

 private:
  SchedulerConfig config() {
    SchedulerConfig c;
    c.clock = [this] { return clock_; };
    c.gang.timeout = kDefaultTimeout;
    c.gang.max_timeout = kMaxTimeout;
    c.gang_starvation = std::chrono::seconds(120);
    c.gang_active_window = std::chrono::seconds(60);
    c.topology_levels = {kRackLabel};
    return c;
  }

  void start() {
    scheduler_ = std::make_unique<Scheduler>(config());
    ++epoch_;
    for (const auto& [name, n] : nodes_) REQUIRE(scheduler_->upsertNode(nodeFacts(name, n)).isOk());
  }

  static model::NodeFacts nodeFacts(const std::string& name, const ModelNode& n) {
    model::NodeFacts f = troupe::testing::gpuNode(name, n.gpus);
    f.labels[kRackLabel] = n.rack;
    return f;
  }

  PodFacts facts(const ModelPod& p) const {
    StringMap annotations;
    if (!p.gang.empty()) {
      annotations[kGangName] = p.gang;
      annotations[kGangSize] = std::to_string(p.size);
      annotations[kGangTimeout] = std::to_string(p.timeout_s) + "s";
      if (p.rack_required) annotations["troupe.dev/topology-required"] = "rack";
    }
    PodFacts f = troupe::testing::gpuPod(p.id, p.gpus, annotations);
    f.uid = p.uid;
    f.priority = p.priority;
    return f;
  }

  void create(const Action& a) {
    if (pods_.count(a.pod)) return;
    ModelPod p;
    p.id = a.pod;
    p.uid = "uid-" + a.pod;
    p.gang = a.gang;
    p.gpus = a.gpus;
    p.size = a.size;
    p.timeout_s = a.timeout_s;
    p.priority = a.priority;
    p.rack_required = a.rack_required;
    p.created = ++created_;
    if (!a.gang.empty()) {
      if (const ModelPod* other = liveMember(a.gang)) {
        // A gang's live pods share one shape: this pod joins it as it is.
        p.size = other->size;
        p.gpus = other->gpus;
        p.timeout_s = other->timeout_s;
        p.priority = other->priority;
        p.rack_required = other->rack_required;
        p.model_incarnation = other->model_incarnation;
      } else {
        p.model_incarnation = ++model_incarnations_;  // re-created under a used name: a new gang
      }
    }
    pods_.emplace(a.pod, std::move(p));
  }

  void filter(const std::string& id, const std::vector<std::string>& candidates) {
    auto it = pods_.find(id);
    if (it == pods_.end() || !it->second.live || it->second.bound) return;
    std::vector<std::string> names;
    for (const std::string& n : candidates) {
      if (nodes_.count(n)) names.push_back(n);
    }
    if (names.empty()) return;
    FilterResult r = scheduler_->filter(facts(it->second), names);
    it->second.passed = r.passed.empty() ? "" : r.passed[0];
    if (!it->second.gang.empty()) noteIncarnation(it->second);
  }

  void bind(const std::string& id) {
    auto it = pods_.find(id);
    if (it == pods_.end() || !it->second.live || it->second.bound || it->second.parked ||
        it->second.passed.empty() || !nodes_.count(it->second.passed))
      return;
    bindCall(it->second);
  }

  void bindCall(ModelPod& p) {
    p.parked = p.live;
    const std::string id = p.id, node = p.passed;
    const uint64_t epoch = epoch_;
    scheduler_->bind(p.uid, "default", p.id, node, [this, id, node, epoch](Result<model::Allocation> r) {
      if (epoch != epoch_) return;  // a Troupe that was restarted since
      ModelPod& q = pods_.at(id);
      q.parked = false;
      if (!r.isOk()) return;
      if (!q.live) {
        violation_ = "deleted pod " + id + " was bound to " + node;
        return;
      }
      if (q.bound) {
        if (q.node != node) violation_ = "pod " + id + " bound twice, to " + q.node + " and " + node;
        return;
      }
      q.bound = true;
      q.node = node;
      q.gpu_set = r.value().gpus;
      bound_now_.insert(id);
    });
  }

  void deletePod(const std::string& id) {
    auto it = pods_.find(id);
    if (it == pods_.end() || !it->second.live) return;
    ModelPod& p = it->second;
    p.live = false;
    p.deleted_since_restart = true;
    p.bound = false;
    p.gpu_set.clear();
    // What ClusterSync does when the watch shows the pod deleted.
    scheduler_->release(p.uid);
    scheduler_->forgetPod(p.uid);
  }

  void addNode(const std::string& name, int gpus, const std::string& rack) {
    if (nodes_.count(name)) return;
    nodes_[name] = ModelNode{gpus, rack};
    REQUIRE(scheduler_->upsertNode(nodeFacts(name, nodes_[name])).isOk());
  }

  void removeNode(const std::string& name) {
    if (!nodes_.count(name) || nodes_.size() <= 2) return;
    // The pods bound there go with it (pod garbage collection deletes them).
    for (auto& [id, p] : pods_) {
      if (p.live && p.bound && p.node == name) deletePod(id);
    }
    nodes_.erase(name);
    scheduler_->removeNode(name);
    for (auto& [id, p] : pods_) {
      if (p.passed == name) p.passed.clear();
    }
  }

  void restart() {
    start();
    for (auto& [id, p] : pods_) {
      p.parked = false;  // binds in flight die with the process; kube-scheduler retries the pods
      p.deleted_since_restart = false;
      p.passed.clear();
      if (!p.live || !p.bound) continue;
      model::Allocation a;
      a.pod_uid = p.uid;
      a.pod_key = "default/" + p.id;
      a.node = p.node;
      a.gpus = p.gpu_set;
      a.gang = p.gang.empty() ? "" : "default/" + p.gang;
      REQUIRE(scheduler_->recordAllocation(a).isOk());
    }
  }

  void noteIncarnation(const ModelPod& p) {
    for (const Scheduler::GangView& v : scheduler_->gangs()) {
      if (v.key != "default/" + p.gang) continue;
      auto [it, fresh] = incarnation_of_.try_emplace({epoch_, v.incarnation}, p.model_incarnation);
      if (!fresh && it->second != p.model_incarnation && violation_.empty()) {
        violation_ = "gang " + p.gang + ": Troupe's incarnation " + std::to_string(v.incarnation) +
                     " holds pods of two different gangs of that name (the old one's pods were all deleted)";
      }
    }
  }

  // Quiet cluster: every pending pod is filtered on every node and bound, round after round,
  // with no time passing. Then every gang whose missing members fit the capacity that is free
  // (not bound, not held for another gang, not kept free for another gang) must be admitted.
  std::optional<std::string> settle() {
    const int rounds = 3 + static_cast<int>(gangNames().size());
    for (int round = 0; round < rounds; ++round) {
      std::vector<ModelPod*> order;
      for (auto& [id, p] : pods_) {
        if (p.live && !p.bound && !p.parked) order.push_back(&p);
      }
      std::stable_sort(order.begin(), order.end(), [](const ModelPod* a, const ModelPod* b) {
        if (a->gang.empty() != b->gang.empty()) return !a->gang.empty();
        if (a->priority != b->priority) return a->priority > b->priority;
        return a->created < b->created;
      });
      const std::vector<std::string> all = nodeNames();
      for (ModelPod* p : order) filter(p->id, all);
      for (ModelPod* p : order) bind(p->id);
      if (!violation_.empty()) return violation_;
      if (auto v = check()) return v;
      bound_now_.clear();
    }
    const std::vector<Scheduler::GangView> views = scheduler_->gangs();
    for (const std::string& gang : gangNames()) {
      const ModelPod* shape = liveMember(gang);
      int bound = 0, unbound = 0;
      for (const auto& [id, p] : pods_) {
        if (!p.live || p.gang != gang) continue;
        (p.bound ? bound : unbound)++;
      }
      const int need = shape->size - bound;
      if (need <= 0 || unbound < need) continue;
      // Free GPUs per node for this gang.
      std::map<std::string, int> free;
      for (const auto& [name, n] : nodes_) free[name] = n.gpus;
      for (const auto& [id, p] : pods_) {
        if (p.live && p.bound && nodes_.count(p.node)) free[p.node] -= static_cast<int>(p.gpu_set.size());
      }
      std::string reason;
      for (const Scheduler::GangView& v : views) {
        if (v.key == "default/" + gang) {
          reason = v.last_reason;
          continue;
        }
        for (const auto& [node, gpus] : v.held_by_node) free[node] -= gpus;
        for (const std::string& node : v.drained_nodes) free.erase(node);
      }
      std::map<std::string, int> members_by_rack;
      int members = 0;
      for (const auto& [node, gpus] : free) {
        const int fit = std::max(0, gpus) / shape->gpus;
        members += fit;
        members_by_rack[nodes_.at(node).rack] += fit;
      }
      bool fits = members >= need;
      if (shape->rack_required) {
        fits = std::any_of(members_by_rack.begin(), members_by_rack.end(),
                           [&](const auto& r) { return r.second >= need; });
      }
      if (fits) {
        return "liveness: gang " + gang + " needs " + std::to_string(need) + " more members of " +
               std::to_string(shape->gpus) +
               " GPUs, which fit the free capacity, but it was not admitted after " + std::to_string(rounds) +
               " quiet rounds (its last reason: " + reason + ")";
      }
    }
    return std::nullopt;
  }

  std::set<std::string> gangNames() const {
    std::set<std::string> out;
    for (const auto& [id, p] : pods_) {
      if (p.live && !p.gang.empty()) out.insert(p.gang);
    }
    return out;
  }

  std::optional<std::string> check() {
    // All or nothing: every member bound in this step sees its gang's minimum bound with it.
    for (const std::string& id : bound_now_) {
      const ModelPod& p = pods_.at(id);
      if (p.gang.empty()) continue;
      int bound = 0;
      for (const auto& [other_id, q] : pods_) bound += q.live && q.bound && q.gang == p.gang ? 1 : 0;
      if (bound < p.size) {
        return "gang " + p.gang + " is partly bound: " + id + " was bound with only " +
               std::to_string(bound) + " of its minimum " + std::to_string(p.size) + " members bound";
      }
    }
    const std::vector<Scheduler::GangView> views = scheduler_->gangs();
    const ClusterSummary summary = scheduler_->summary();
    // GPUs: the node's count is exactly the live bound pods plus the holds of live plans.
    std::map<std::string, int64_t> expect;
    std::map<std::string, std::set<int>> taken;
    for (const auto& [id, p] : pods_) {
      if (!p.live || !p.bound || !nodes_.count(p.node)) continue;
      expect[p.node] += 1000 * static_cast<int64_t>(p.gpu_set.size());
      for (int g : p.gpu_set) {
        if (!taken[p.node].insert(g).second)
          return "GPU " + std::to_string(g) + " of " + p.node + " given twice";
      }
    }
    int held = 0, drained = 0;
    for (const Scheduler::GangView& v : views) {
      for (const auto& [node, gpus] : v.held_by_node) expect[node] += 1000 * static_cast<int64_t>(gpus);
      held += v.held_gpus;
      drained += static_cast<int>(v.drained_nodes.size());
    }
    for (const ClusterSummary::NodeRow& row : summary.by_node) {
      if (row.used_milli != expect[row.node]) {
        return "node " + row.node + " counts " + std::to_string(row.used_milli) +
               " milli-GPUs in use; live bound pods " + "and plans of live gangs account for " +
               std::to_string(expect[row.node]);
      }
    }
    if (summary.gangs.held_gpus != held || summary.gangs.draining_nodes != drained) {
      return "the summary's gang gauges disagree with the gangs: held " +
             std::to_string(summary.gangs.held_gpus) + " vs " + std::to_string(held) + ", draining " +
             std::to_string(summary.gangs.draining_nodes) + " vs " + std::to_string(drained);
    }
    // Members are live pods; only gangs with a live unbound member plan, hold, drain or park.
    for (const Scheduler::GangView& v : views) {
      if (v.members == 0) return "gang " + v.key + " is kept with no member";
      bool live_unbound = false;
      for (const std::string& uid : v.member_uids) {
        const auto it = pods_.find(uid.substr(4));  // "uid-" + id
        if (it == pods_.end() || !it->second.live) {
          return "gang " + v.key + " counts " + uid + " as a member, but that pod was deleted";
        }
        live_unbound = live_unbound || !it->second.bound;
      }
      if (!live_unbound && (v.held_gpus > 0 || !v.drained_nodes.empty() || v.waiting_binds > 0)) {
        return "gang " + v.key + " holds " + std::to_string(v.held_gpus) + " GPUs, drains " +
               std::to_string(v.drained_nodes.size()) + " nodes and parks " +
               std::to_string(v.waiting_binds) + " binds with no pending member left";
      }
    }
    return std::nullopt;
  }

  std::unique_ptr<Scheduler> scheduler_;
  Clock::time_point clock_ = Clock::time_point{} + std::chrono::hours(1);
  uint64_t epoch_ = 0;
  std::map<std::string, ModelPod> pods_;
  std::map<std::string, ModelNode> nodes_;
  uint64_t created_ = 0;
  uint64_t model_incarnations_ = 0;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> incarnation_of_;  // (epoch, Troupe's) -> model's
  std::set<std::string> bound_now_;
  std::string violation_;
};

// Chooses the next action from the world as it is.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  std::vector<Action> initialNodes() {
    std::vector<Action> out;
    const int n = 4 + pick(4);
    for (int i = 0; i < n; ++i) out.push_back(addNode());
    return out;
  }

  Action next(const World& w) {
    std::vector<const ModelPod*> live, pending, passed, deleted;
    for (const auto& [id, p] : w.pods()) {
      if (p.live) live.push_back(&p);
      if (p.live && !p.bound) pending.push_back(&p);
      if (p.live && !p.bound && !p.parked && !p.passed.empty()) passed.push_back(&p);
      if (!p.live && p.deleted_since_restart) deleted.push_back(&p);
    }
    const int r = pick(100);
    if (r < 16 || live.empty()) return create(w);
    if (r < 40 && !pending.empty()) return filter(w, *pending[pick(pending.size())]);
    if (r < 62 && !passed.empty()) return bindOf(*passed[pick(passed.size())]);
    if (r < 72 && !live.empty()) return deleteOf(*live[pick(live.size())]);
    if (r < 75 && !deleted.empty()) {
      Action a;
      a.kind = pick(2) ? Action::Kind::kLateFilter : Action::Kind::kLateBind;
      a.pod = deleted[pick(deleted.size())]->id;
      return a;
    }
    if (r < 77) return addNode();
    if (r < 79 && w.nodes().size() > 3) {
      Action a;
      a.kind = Action::Kind::kRemoveNode;
      a.nodes = {w.nodeNames()[pick(w.nodes().size())]};
      return a;
    }
    if (r < 93) {
      Action a;
      a.kind = Action::Kind::kAdvance;
      const int64_t steps[] = {200, 1000, 5000, 15000, 31000, 61000, 125000};
      a.ms = steps[pick(7)];
      return a;
    }
    if (r < 95) {
      Action a;
      a.kind = Action::Kind::kRestart;
      return a;
    }
    if (r < 97) {
      Action a;
      a.kind = Action::Kind::kSettle;
      return a;
    }
    return deleteGang(w);
  }

  // Deleting every live pod of one gang, one after another (a Job deleted).
  std::vector<Action> deleteAllOf(const World& w, const std::string& gang) {
    std::vector<Action> out;
    for (const auto& [id, p] : w.pods()) {
      if (p.live && p.gang == gang) out.push_back(deleteOf(p));
    }
    return out;
  }

  bool wantsWholeGangDeletion() { return pick(3) == 0; }
  std::string lastGang() const { return last_gang_; }

 private:
  int pick(size_t n) { return static_cast<int>(std::uniform_int_distribution<size_t>(0, n - 1)(rng_)); }

  Action addNode() {
    Action a;
    a.kind = Action::Kind::kAddNode;
    a.nodes = {"n" + std::to_string(nodes_++)};
    a.node_gpus = pick(3) ? 8 : 4;
    a.rack = "r" + std::to_string(pick(2));
    return a;
  }

  Action create(const World& w) {
    Action a;
    a.kind = Action::Kind::kCreate;
    a.pod = "p" + std::to_string(pods_++);
    if (pick(4) == 0) {
      const int gpus[] = {1, 2, 4, 8};
      a.gpus = gpus[pick(4)];
      return a;
    }
    a.gang = "g" + std::to_string(pick(5));
    if (const ModelPod* other = w.liveMember(a.gang)) {
      a.size = other->size;
      a.gpus = other->gpus;
    } else {
      const int gpus[] = {1, 2, 4, 8};
      a.gpus = gpus[pick(4)];
      a.size = 1 + pick(5);
      a.timeout_s = pick(4) == 0 ? 600 : 20 + pick(30);  // 600: above the maximum, capped
      a.priority = pick(3) == 0 ? 100 : 0;
      a.rack_required = pick(4) == 0;
    }
    return a;
  }

  Action filter(const World& w, const ModelPod& p) {
    Action a;
    a.kind = Action::Kind::kFilter;
    a.pod = p.id;
    std::vector<std::string> names = w.nodeNames();
    if (pick(3) == 0) {
      // kube-scheduler's own filters left only some nodes.
      std::vector<std::string> some;
      for (const std::string& n : names) {
        if (pick(2)) some.push_back(n);
      }
      if (!some.empty()) names = some;
    }
    a.nodes = names;
    return a;
  }

  static Action bindOf(const ModelPod& p) {
    Action a;
    a.kind = Action::Kind::kBind;
    a.pod = p.id;
    return a;
  }

  static Action deleteOf(const ModelPod& p) {
    Action a;
    a.kind = Action::Kind::kDelete;
    a.pod = p.id;
    return a;
  }

  Action deleteGang(const World& w) {
    for (const auto& [id, p] : w.pods()) {
      if (p.live && !p.gang.empty()) {
        last_gang_ = p.gang;
        Action a = deleteOf(p);
        return a;
      }
    }
    return create(w);
  }

  std::mt19937_64 rng_;
  int nodes_ = 0, pods_ = 0;
  std::string last_gang_;
};

struct Outcome {
  std::optional<std::string> violation;
  size_t failed_at = 0;  // index of the failing action
};

// The kind of a violation: its text up to the first ':' ("gang g1 is partly bound: ..." and
// "liveness: ..." differ), so shrinking keeps the failure it started from.
std::string kindOf(const std::string& violation) {
  const size_t colon = violation.find(':');
  std::string head = violation.substr(0, colon);
  // Drop names and numbers: "gang g1 is partly bound" and "gang g3 is partly bound" are one kind.
  std::string out;
  std::istringstream words(head);
  for (std::string w; words >> w;) {
    if (std::any_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      continue;
    out += w + " ";
  }
  return out;
}

Outcome replay(const std::vector<Action>& actions) {
  World w;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (auto v = w.apply(actions[i])) return {v, i};
  }
  return {};
}

// Removes chunks of steps while the list still fails (each try replays from scratch).
std::vector<Action> shrink(std::vector<Action> actions) {
  Outcome o = replay(actions);
  if (!o.violation) return actions;
  const std::string kind = kindOf(*o.violation);
  actions.resize(o.failed_at + 1);
  for (size_t chunk = actions.size() / 2; chunk >= 1; chunk /= 2) {
    for (size_t start = 0; start + chunk <= actions.size();) {
      std::vector<Action> shorter(actions.begin(), actions.begin() + static_cast<long>(start));
      shorter.insert(shorter.end(), actions.begin() + static_cast<long>(start + chunk), actions.end());
      Outcome s = replay(shorter);
      if (s.violation && kindOf(*s.violation) == kind) {
        shorter.resize(s.failed_at + 1);
        actions = std::move(shorter);
      } else {
        start += chunk;
      }
    }
    if (chunk == 1) break;
  }
  return actions;
}

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

TEST_CASE("gang model: random lifecycles keep all-or-nothing, holds and liveness", "[gang-model]") {
  const int seeds = envInt("TROUPE_GANG_MODEL_SEEDS", 40);
  const int steps = envInt("TROUPE_GANG_MODEL_STEPS", 3000);
  const int first = envInt("TROUPE_GANG_MODEL_FIRST_SEED", 1);
  for (int seed = first; seed < first + seeds; ++seed) {
    Generator gen(static_cast<uint64_t>(seed));
    World world;
    std::vector<Action> actions;
    std::optional<std::string> violation;
    auto run = [&](const Action& a) {
      actions.push_back(a);
      violation = world.apply(a);
      return !violation;
    };
    for (const Action& a : gen.initialNodes()) run(a);
    for (int i = 0; i < steps && !violation; ++i) {
      Action a = gen.next(world);
      if (!run(a)) break;
      if (a.kind == Action::Kind::kDelete && gen.wantsWholeGangDeletion()) {
        // Sometimes the deletion is the whole gang (its Job), right away.
        const auto it = world.pods().find(a.pod);
        if (it != world.pods().end() && !it->second.gang.empty()) {
          for (const Action& d : gen.deleteAllOf(world, it->second.gang)) {
            if (!run(d)) break;
          }
        }
      }
    }
    if (!violation) {
      Action settle;
      settle.kind = Action::Kind::kSettle;
      run(settle);
    }
    if (violation) {
      const std::vector<Action> minimal = shrink(actions);
      std::ostringstream o;
      o << "seed " << seed << ": " << *violation << "\nminimal steps (" << minimal.size() << " of "
        << actions.size() << "):\n";
      for (size_t i = 0; i < minimal.size(); ++i) o << "  " << i + 1 << ". " << minimal[i].describe() << "\n";
      o << "violation after them: " << replay(minimal).violation.value_or("(none: flaky?)");
      FAIL(o.str());
    }
  }
}
