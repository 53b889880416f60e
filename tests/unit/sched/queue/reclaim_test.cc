// The reclaim planner: hand-built clusters for each rule (room for a single pod, the cheapest
// victims, whole gangs, non-preemptible queues, guarantees, the minimum runtime, no eviction
// for nothing, a waiting gang), and random clusters whose every plan is checked against them.
#include "troupe/sched/queue/reclaim.h"

#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <random>
#include <set>

#include "support/fixtures.h"
#include "troupe/sched/gang/gang_planner.h"
#include "troupe/sched/score/placement.h"

using namespace troupe;
using namespace troupe::sched;

namespace {

constexpr const char* kH100 = "NVIDIA-H100-80GB-HBM3";
const QueueClock::time_point kNow = QueueClock::time_point{} + std::chrono::hours(10);
constexpr std::chrono::minutes kMinRuntime{5};

struct QueueDef {
  std::string name;
  int64_t guaranteed_milli = 0;  // 0 = none
  int64_t fair_milli = 0;
  bool preemptible = true;
  std::string parent;
  std::map<std::string, int64_t> guaranteed_product;
};

// A cluster as the planner sees it, built by hand: nodes, queues and pods; allocated amounts
// are summed from the bound pods (a child's count for its parents too).
class Cluster {
 public:
  void node(const std::string& name, int gpus, const std::string& product = kH100) {
    nodes_.emplace_back(model::nodeFromFacts(testing::gpuNode(name, gpus, product), catalog_).value());
  }
  void queue(std::string name, int64_t guaranteed_milli, int64_t fair_milli, bool preemptible = true,
             std::string parent = "", std::map<std::string, int64_t> guaranteed_product = {}) {
    queues_.push_back({std::move(name), guaranteed_milli, fair_milli, preemptible, std::move(parent),
                       std::move(guaranteed_product)});
  }

  // A bound pod of `milli` on `node`, on its lowest free GPUs (a share when milli < 1000).
  QueuedPod& bound(const std::string& name, const std::string& queue, const std::string& node, int64_t milli,
                   int64_t priority = 0, std::chrono::minutes age = std::chrono::minutes(60),
                   const std::string& gang = "") {
    model::NodeState& n = nodeNamed(node);
    model::Allocation a;
    a.pod_uid = "uid-" + name;
    a.pod_key = "ns/" + name;
    a.node = node;
    if (milli < model::kMilliPerGpu) {
      a.milli_per_gpu = milli;
      for (int g = 0; g < n.gpuCount(); ++g) {
        if (n.gpuFreeMilli(g) >= milli) {
          a.gpus = {g};
          break;
        }
      }
    } else {
      for (int g = 0; g < n.gpuCount() && static_cast<int64_t>(a.gpus.size()) * 1000 < milli; ++g) {
        if (n.gpuFreeMilli(g) == model::kMilliPerGpu) a.gpus.push_back(g);
      }
    }
    REQUIRE(n.add(a).isOk());
    QueuedPod p;
    p.uid = a.pod_uid;
    p.key = a.pod_key;
    p.queue = queue;
    p.gang = gang;
    p.milli = milli;
    p.node = node;
    p.product = n.info().gpu_product;
    p.priority = priority;
    p.since = kNow - age;
    pods_.push_back(p);
    return pods_.back();
  }

  QueuedPod& pending(const std::string& name, const std::string& queue, int64_t milli, int64_t priority = 0,
                     std::chrono::minutes age = std::chrono::minutes(1), const std::string& gang = "") {
    QueuedPod p;
    p.uid = "uid-" + name;
    p.key = "ns/" + name;
    p.queue = queue;
    p.gang = gang;
    p.milli = milli;
    p.priority = priority;
    p.since = kNow - age;
    pods_.push_back(p);
    return pods_.back();
  }

  ReclaimInput input() const {
    ReclaimInput in;
    for (const QueueDef& d : queues_) {
      QueueStatus s;
      s.spec.name = d.name;
      s.spec.parent = d.parent;
      s.spec.preemptible = d.preemptible;
      if (d.guaranteed_milli > 0) s.spec.guaranteed.milli = d.guaranteed_milli;
      s.spec.guaranteed.product_milli = d.guaranteed_product;
      s.fair_share.total_milli = d.fair_milli;
      s.fair_share.share[kH100] = d.fair_milli;
      in.queues.push_back(s);
    }
    for (const QueuedPod& p : pods_) {
      if (!p.bound()) continue;
      // The pod's queue and its ancestors hold it.
      for (std::string at = p.queue; !at.empty();) {
        QueueStatus* s = find(in.queues, at);
        if (s == nullptr) break;
        s->allocated_milli += p.milli;
        s->allocated[p.product] += p.milli;
        at = s->spec.parent;
      }
    }
    in.pods = {pods_.begin(), pods_.end()};
    for (const model::NodeState& n : nodes_) in.nodes.push_back(&n);
    in.now = kNow;
    in.min_runtime = kMinRuntime;
    return in;
  }

  model::NodeState& nodeNamed(const std::string& name) {
    for (model::NodeState& n : nodes_) {
      if (n.info().name == name) return n;
    }
    FAIL("no node " << name);
    return nodes_.front();
  }

 private:
  static QueueStatus* find(std::vector<QueueStatus>& qs, const std::string& name) {
    for (QueueStatus& q : qs) {
      if (q.spec.name == name) return &q;
    }
    return nullptr;
  }

  model::TopologyCatalog catalog_;
  std::deque<model::NodeState> nodes_;  // stable addresses for ReclaimInput::nodes
  std::vector<QueueDef> queues_;
  std::deque<QueuedPod> pods_;
};

std::set<std::string> victimKeys(const ReclaimPlan& plan) {
  std::set<std::string> out;
  for (const ReclaimVictim& v : plan.victims) out.insert(v.key);
  return out;
}

// Does the plan's waiting pod (or gang) fit once its victims are gone? Checked afresh here:
// copies of the nodes without the victims, the derived request, placeOnNode / planGang.
bool fitsAfter(const ReclaimInput& in, const std::set<std::string>& victim_uids, const ReclaimPlan& plan) {
  std::deque<model::NodeState> copies;
  std::vector<const model::NodeState*> nodes;
  for (const model::NodeState* n : in.nodes) {
    copies.push_back(*n);
    for (const std::string& uid : victim_uids) copies.back().remove(uid);
    nodes.push_back(&copies.back());
  }
  std::vector<const QueuedPod*> members;
  for (const QueuedPod& p : in.pods) {
    if (p.bound() || p.queue != plan.queue) continue;
    if (p.key == plan.for_key || (!p.gang.empty() && p.gang == plan.for_key)) members.push_back(&p);
  }
  REQUIRE(!members.empty());
  const QueuedPod& first = *members.front();
  GpuRequest req;
  if (first.milli % 1000 == 0) {
    req.gpus = static_cast<int>(first.milli / 1000);
  } else {
    req.gpus = 1;
    req.milli_per_gpu = first.milli;
  }
  if (!first.gang.empty()) {
    return !planGang(nodes, req, static_cast<int>(members.size()), first.gang, {}).slots.empty();
  }
  for (const model::NodeState* n : nodes) {
    if (placeOnNode(*n, req)) return true;
  }
  return false;
}

bool fitsAfter(const ReclaimInput& in, const ReclaimPlan& plan) {
  std::set<std::string> uids;
  for (const ReclaimVictim& v : plan.victims) uids.insert(v.uid);
  return fitsAfter(in, uids, plan);
}

}  // namespace

TEST_CASE("reclaim: a single pod gets its room, and the reason says who and why", "[reclaim]") {
  Cluster c;
  c.node("n0", 8);
  c.node("n1", 8);
  c.queue("batch", 0, 12000);
  c.queue("research", 8000, 8000);
  // batch holds all 16 GPUs, above its fair share of 12; research holds none of its 8.
  c.bound("b0", "batch", "n0", 4000, 0, std::chrono::minutes(60));
  c.bound("b1", "batch", "n0", 4000, 0, std::chrono::minutes(50));
  c.bound("b2", "batch", "n1", 4000, 0, std::chrono::minutes(30));  // the most recently started
  c.bound("b3", "batch", "n1", 4000, 0, std::chrono::minutes(40));
  c.pending("train-0", "research", 4000);
  ReclaimInput in = c.input();

  std::optional<ReclaimPlan> plan = planReclaim(in);
  REQUIRE(plan);
  CHECK(plan->queue == "research");
  CHECK(plan->for_key == "ns/train-0");
  REQUIRE(plan->victims.size() == 1);
  CHECK(plan->victims[0].key == "ns/b2");
  CHECK(plan->victims[0].node == "n1");
  CHECK(plan->victims[0].queue == "batch");
  CHECK(plan->freed_milli == 4000);
  CHECK(fitsAfter(in, *plan));
  CHECK(plan->reason ==
        "troupe: reclaimed for queue research (holds 0 of 8 guaranteed GPUs) so that pod ns/train-0 (4 GPUs) "
        "fits: queue batch holds 16 GPUs, above its fair share of 12, and gives up 4 (1 pod)");
}

TEST_CASE("reclaim: no plan when the waiting pod fits already or its queue holds its guarantee",
          "[reclaim]") {
  Cluster c;
  c.node("n0", 8);
  c.queue("batch", 0, 4000);
  c.queue("research", 8000, 4000);
  c.bound("b0", "batch", "n0", 4000);
  c.pending("fits", "research", 4000);
  CHECK_FALSE(planReclaim(c.input()));  // 4 GPUs are free: nothing to reclaim

  Cluster full;
  full.node("n0", 8);
  full.queue("batch", 0, 0);
  full.queue("research", 4000, 4000);
  full.bound("b0", "batch", "n0", 4000);
  full.bound("r0", "research", "n0", 4000);
  full.pending("more", "research", 4000);
  CHECK_FALSE(planReclaim(full.input()));  // research holds its 4 guaranteed GPUs

  Cluster beyond;
  beyond.node("n0", 8);
  beyond.queue("batch", 0, 0);
  beyond.queue("research", 4000, 4000);
  beyond.bound("b0", "batch", "n0", 8000);
  beyond.pending("big", "research", 8000);
  CHECK_FALSE(planReclaim(beyond.input()));  // 8 would take research beyond its guarantee of 4
}

TEST_CASE("reclaim: the cheapest victims: fewest GPUs, then lowest priority, then most recent", "[reclaim]") {
  SECTION("fewest GPUs: two 1-GPU pods rather than an 8-GPU one") {
    Cluster c;
    c.node("n0", 8);
    c.node("n1", 8);
    c.queue("batch", 0, 0);
    c.queue("research", 8000, 8000);
    c.bound("big", "batch", "n0", 6000);
    c.bound("s1", "batch", "n0", 1000);
    c.bound("s2", "batch", "n0", 1000);
    c.bound("whole", "batch", "n1", 8000);
    c.pending("want2", "research", 2000);
    std::optional<ReclaimPlan> plan = planReclaim(c.input());
    REQUIRE(plan);
    CHECK(victimKeys(*plan) == std::set<std::string>{"ns/s1", "ns/s2"});
    CHECK(plan->freed_milli == 2000);
  }
  SECTION("the same GPUs: the lower priority") {
    Cluster c;
    c.node("n0", 8);
    c.node("n1", 8);
    c.queue("batch", 0, 0);
    c.queue("research", 8000, 8000);
    c.bound("big", "batch", "n0", 6000);
    c.bound("s1", "batch", "n0", 1000, 5);
    c.bound("s2", "batch", "n0", 1000);
    c.bound("low", "batch", "n1", 2000, 1);
    c.bound("rest", "batch", "n1", 6000, 9);
    c.pending("want2", "research", 2000);
    std::optional<ReclaimPlan> plan = planReclaim(c.input());
    REQUIRE(plan);
    CHECK(victimKeys(*plan) == std::set<std::string>{"ns/low"});
  }
  SECTION("the same GPUs and priority: the most recently started") {
    Cluster c;
    c.node("n0", 8);
    c.queue("batch", 0, 0);
    c.queue("research", 8000, 8000);
    c.bound("old", "batch", "n0", 4000, 0, std::chrono::minutes(90));
    c.bound("new", "batch", "n0", 4000, 0, std::chrono::minutes(10));
    c.pending("want4", "research", 4000);
    std::optional<ReclaimPlan> plan = planReclaim(c.input());
    REQUIRE(plan);
    CHECK(victimKeys(*plan) == std::set<std::string>{"ns/new"});
  }
  SECTION("only where it makes room: small pods on a node that cannot fit the pod are spared") {
    Cluster c;
    c.node("n0", 8);
    c.node("n1", 8);
    c.queue("batch", 0, 0);
    c.queue("keep", 0, 0, false);
    c.queue("research", 8000, 8000);
    c.bound("k0", "keep", "n0", 6000);
    c.bound("s1", "batch", "n0", 1000);
    c.bound("s2", "batch", "n0", 1000);
    c.bound("four", "batch", "n1", 4000);
    c.bound("other", "batch", "n1", 4000, 3);
    c.pending("want4", "research", 4000);
    std::optional<ReclaimPlan> plan = planReclaim(c.input());
    REQUIRE(plan);
    CHECK(victimKeys(*plan) == std::set<std::string>{"ns/four"});
  }
}

TEST_CASE("reclaim: a gang victim is taken whole or another victim is chosen", "[reclaim]") {
  SECTION("whole: both members, though the room is needed on one node") {
    Cluster c;
    c.node("n0", 8);
    c.node("n1", 8);
    c.queue("batch", 0, 0);
    c.queue("keep", 0, 0, false);
    c.queue("research", 8000, 8000);
    c.bound("g-0", "batch", "n0", 4000, 0, std::chrono::minutes(60), "ns/g");
    c.bound("g-1", "batch", "n1", 4000, 0, std::chrono::minutes(60), "ns/g");
    c.bound("k0", "keep", "n0", 4000);
    c.bound("k1", "keep", "n1", 4000);
    c.pending("want4", "research", 4000);
    ReclaimInput in = c.input();
    std::optional<ReclaimPlan> plan = planReclaim(in);
    REQUIRE(plan);
    CHECK(victimKeys(*plan) == std::set<std::string>{"ns/g-0", "ns/g-1"});
    CHECK(plan->freed_milli == 8000);
    for (const ReclaimVictim& v : plan->victims) CHECK(v.gang == "ns/g");
    CHECK(fitsAfter(in, *plan));
  }
  SECTION("a young member spares the whole gang: another victim, never a part of it") {
    Cluster c;
    c.node("n0", 8);
    c.node("n1", 8);
    c.node("n2", 8);
    c.queue("batch", 0, 0);
    c.queue("keep", 0, 0, false);
    c.queue("research", 8000, 8000);
    c.bound("g-0", "batch", "n0", 4000, 0, std::chrono::minutes(60), "ns/g");
    c.bound("g-1", "batch", "n1", 4000, 0, std::chrono::minutes(2), "ns/g");  // younger than 5 min
    c.bound("k0", "keep", "n0", 4000);
    c.bound("k1", "keep", "n1", 4000);
    c.bound("whole", "batch", "n2", 8000);
    c.pending("want4", "research", 4000);
    std::optional<ReclaimPlan> plan = planReclaim(c.input());
    REQUIRE(plan);
    CHECK(victimKeys(*plan) == std::set<std::string>{"ns/whole"});
  }
}

TEST_CASE("reclaim: a non-preemptible queue is never touched", "[reclaim]") {
  Cluster c;
  c.node("n0", 8);
  c.queue("prod", 0, 0, false);
  c.queue("research", 8000, 8000);
  c.bound("p0", "prod", "n0", 4000);
  c.bound("p1", "prod", "n0", 4000);
  c.pending("want4", "research", 4000);
  CHECK_FALSE(planReclaim(c.input()));

  c.node("n1", 8);
  c.queue("batch", 0, 0);
  c.bound("costly", "batch", "n1", 8000, 100);
  std::optional<ReclaimPlan> plan = planReclaim(c.input());
  REQUIRE(plan);
  CHECK(victimKeys(*plan) == std::set<std::string>{"ns/costly"});
}

TEST_CASE("reclaim: victims only from queues above their fair share", "[reclaim]") {
  Cluster c;
  c.node("n0", 8);
  c.queue("fair", 0, 8000);  // holds 8 of a fair share of 8: not above it
  c.queue("research", 8000, 8000);
  c.bound("f0", "fair", "n0", 8000);
  c.pending("want4", "research", 4000);
  CHECK_FALSE(planReclaim(c.input()));
}

TEST_CASE("reclaim: a queue is never taken below its guarantee", "[reclaim]") {
  Cluster c;
  c.node("n0", 8);
  c.node("n1", 8);
  c.queue("batch", 12000, 4000);  // holds 16, guaranteed 12: 4 may go
  c.queue("research", 8000, 8000);
  c.bound("b0", "batch", "n0", 4000);
  c.bound("b1", "batch", "n0", 4000);
  c.bound("b2", "batch", "n1", 4000);
  c.bound("b3", "batch", "n1", 4000);
  QueuedPod& want = c.pending("want8", "research", 8000);
  CHECK_FALSE(planReclaim(c.input()));  // 8 would leave batch 8 of its 12

  want.milli = 4000;
  std::optional<ReclaimPlan> plan = planReclaim(c.input());
  REQUIRE(plan);
  CHECK(plan->freed_milli == 4000);

  SECTION("per product, and through the parent's guarantee") {
    Cluster h;
    h.node("n0", 8);
    h.queue("org", 0, 0);
    h.queue("org-a", 0, 0, true, "org");
    h.queue("org-b", 0, 0, true, "org");
    h.queue("research", 8000, 8000);
    h.bound("a0", "org-a", "n0", 4000);
    h.bound("b0", "org-b", "n0", 4000);
    h.pending("want4", "research", 4000);
    REQUIRE(planReclaim(h.input()));  // nothing guaranteed: one of them goes

    Cluster p;
    p.node("n0", 8);
    p.queue("org", 0, 0, true, "", {{kH100, 8000}});  // the parent keeps 8 H100s
    p.queue("org-a", 0, 0, true, "org");
    p.queue("org-b", 0, 0, true, "org");
    p.queue("research", 8000, 8000);
    p.bound("a0", "org-a", "n0", 4000);
    p.bound("b0", "org-b", "n0", 4000);
    p.pending("want4", "research", 4000);
    CHECK_FALSE(planReclaim(p.input()));
  }
}

TEST_CASE("reclaim: a pod younger than the minimum runtime is spared", "[reclaim]") {
  Cluster c;
  c.node("n0", 8);
  c.node("n1", 8);
  c.queue("batch", 0, 0);
  c.queue("research", 8000, 8000);
  c.bound("young", "batch", "n0", 4000, 0, std::chrono::minutes(4));
  c.bound("young2", "batch", "n0", 4000, 0, std::chrono::minutes(1));
  c.bound("old", "batch", "n1", 8000, 0, std::chrono::minutes(5));  // exactly the minimum: may go
  c.pending("want4", "research", 4000);
  std::optional<ReclaimPlan> plan = planReclaim(c.input());
  REQUIRE(plan);
  CHECK(victimKeys(*plan) == std::set<std::string>{"ns/old"});

  Cluster all_young;
  all_young.node("n0", 8);
  all_young.queue("batch", 0, 0);
  all_young.queue("research", 8000, 8000);
  all_young.bound("young", "batch", "n0", 8000, 0, std::chrono::minutes(4));
  all_young.pending("want4", "research", 4000);
  CHECK_FALSE(planReclaim(all_young.input()));
}

TEST_CASE("reclaim: never evicts for nothing", "[reclaim]") {
  SECTION("the pod asks for a product no node has") {
    Cluster c;
    c.node("n0", 8);
    c.queue("batch", 0, 0);
    c.queue("research", 8000, 8000);
    c.bound("b0", "batch", "n0", 8000);
    c.pending("a100", "research", 4000).models = {"NVIDIA-A100-SXM4-80GB"};
    CHECK_FALSE(planReclaim(c.input()));
  }
  SECTION("all the victims there are would not make room") {
    Cluster c;
    c.node("n0", 8);
    c.node("n1", 8);
    c.queue("batch", 0, 0);
    c.queue("keep", 0, 0, false);
    c.queue("research", 16000, 8000);
    c.bound("b0", "batch", "n0", 4000);
    c.bound("k0", "keep", "n0", 4000);
    c.bound("b1", "batch", "n1", 4000);
    c.bound("k1", "keep", "n1", 4000);
    c.pending("want8", "research", 8000);  // 4 + 4 on two nodes is not 8 on one
    CHECK_FALSE(planReclaim(c.input()));
  }
}

TEST_CASE("reclaim: a waiting gang gets room for all its members", "[reclaim]") {
  Cluster c;
  c.node("n0", 8);
  c.node("n1", 8);
  c.node("n2", 8);
  c.queue("batch", 0, 0);
  c.queue("research", 16000, 8000);
  c.bound("whole", "batch", "n0", 8000, 0, std::chrono::minutes(20));
  c.bound("h0", "batch", "n1", 4000, 0, std::chrono::minutes(30));
  c.bound("h1", "batch", "n1", 4000, 0, std::chrono::minutes(30));
  for (int i = 0; i < 4; ++i)
    c.bound("q" + std::to_string(i), "batch", "n2", 2000, 0, std::chrono::minutes(90));
  c.pending("t-0", "research", 8000, 0, std::chrono::minutes(1), "ns/t");
  c.pending("t-1", "research", 8000, 0, std::chrono::minutes(1), "ns/t");
  ReclaimInput in = c.input();
  std::optional<ReclaimPlan> plan = planReclaim(in);
  REQUIRE(plan);
  CHECK(plan->for_key == "ns/t");
  CHECK(plan->freed_milli == 16000);
  CHECK(fitsAfter(in, *plan));
  // Units in cost order until both members fit: the four 2-GPU pods, then the two 4-GPU ones;
  // the 8-GPU pod is spared and no victim could be left out.
  CHECK(victimKeys(*plan) == std::set<std::string>{"ns/q0", "ns/q1", "ns/q2", "ns/q3", "ns/h0", "ns/h1"});
  CHECK(plan->reason.find("so that gang ns/t (2 pods, 16 GPUs) fits") != std::string::npos);
}

TEST_CASE("reclaim: the queue furthest below its guarantee first, then priority, then age", "[reclaim]") {
  Cluster c;
  c.node("n0", 8);
  c.queue("batch", 0, 0);
  c.queue("a", 8000, 4000);
  c.queue("b", 4000, 4000);
  c.bound("b-held", "b", "n0", 2000);  // b holds half its guarantee, a none
  c.bound("x0", "batch", "n0", 2000);
  c.bound("x1", "batch", "n0", 2000);
  c.bound("x2", "batch", "n0", 2000);
  c.pending("b-first", "b", 2000, 100);
  c.pending("a-old", "a", 2000, 1, std::chrono::minutes(9));
  c.pending("a-new", "a", 2000, 1, std::chrono::minutes(2));
  c.pending("a-low", "a", 2000, 0, std::chrono::minutes(30));
  std::optional<ReclaimPlan> plan = planReclaim(c.input());
  REQUIRE(plan);
  CHECK(plan->queue == "a");
  CHECK(plan->for_key == "ns/a-old");
}

namespace {

std::vector<std::string> lineageOf(const ReclaimInput& in, const std::string& queue) {
  std::vector<std::string> out;
  for (std::string at = queue; !at.empty();) {
    const QueueStatus* s = nullptr;
    for (const QueueStatus& q : in.queues) {
      if (q.spec.name == at) s = &q;
    }
    if (s == nullptr) break;
    out.push_back(at);
    at = s->spec.parent;
  }
  return out;
}

const QueueStatus& statusOf(const ReclaimInput& in, const std::string& queue) {
  for (const QueueStatus& q : in.queues) {
    if (q.spec.name == queue) return q;
  }
  FAIL("no queue " << queue);
  return in.queues.front();
}

bool hasRoom(const model::NodeState& n, int64_t milli) {
  if (milli >= 1000) return n.wholeFreeCount() * 1000 >= milli;
  for (int g = 0; g < n.gpuCount(); ++g) {
    if (n.gpuFreeMilli(g) >= milli) return true;
  }
  return false;
}

// Places every served pod of the plan, in order, on the node the plan gave it, on copies of
// the nodes without `victim_uids`; false as soon as one does not fit.
bool replayFits(const ReclaimInput& in, const std::set<std::string>& victim_uids, const ReclaimPlan& plan) {
  std::map<std::string, model::NodeState> copies;
  for (const model::NodeState* n : in.nodes) {
    model::NodeState& copy = copies.emplace(n->info().name, *n).first->second;
    for (const std::string& uid : victim_uids) copy.remove(uid);
  }
  std::map<std::string, const QueuedPod*> by_uid;
  for (const QueuedPod& p : in.pods) by_uid[p.uid] = &p;
  for (const ReclaimServed& s : plan.served) {
    for (size_t i = 0; i < s.uids.size(); ++i) {
      const QueuedPod& p = *by_uid.at(s.uids[i]);
      GpuRequest req;
      if (p.milli % 1000 == 0) {
        req.gpus = static_cast<int>(p.milli / 1000);
      } else {
        req.gpus = 1;
        req.milli_per_gpu = p.milli;
      }
      auto it = copies.find(s.nodes[i]);
      if (it == copies.end()) return false;
      std::optional<Placement> placed = placeOnNode(it->second, req);
      if (!placed) return false;
      model::Allocation a;
      a.pod_uid = p.uid;
      a.pod_key = p.key;
      a.node = s.nodes[i];
      a.gpus = placed->gpus;
      a.milli_per_gpu = req.milli_per_gpu;
      if (!it->second.add(a).isOk()) return false;
    }
  }
  return true;
}

// Every rule of reclaim.h, checked on one plan.
void checkPlan(const ReclaimInput& in, const ReclaimPlan& plan) {
  INFO(plan.reason);
  std::string layout;  // what the plan did, for a failure's message
  for (const ReclaimVictim& v : plan.victims)
    layout += " evict " + v.key + "@" + v.node + ":" + std::to_string(v.milli);
  for (const ReclaimServed& s : plan.served) {
    for (size_t i = 0; i < s.uids.size(); ++i) layout += " place " + s.uids[i] + "@" + s.nodes[i];
  }
  for (const model::NodeState* n : in.nodes) {
    layout += " | " + n->info().name + ":";
    for (const auto& [uid, a] : n->allocations()) {
      layout += " " + uid + "[";
      for (int g : a.gpus) layout += std::to_string(g);
      layout += "]" + std::to_string(a.milli_per_gpu);
    }
  }
  INFO(layout);
  const QueueStatus& mine = statusOf(in, plan.queue);
  REQUIRE(mine.spec.guaranteed.milli);
  CHECK(mine.allocated_milli < *mine.spec.guaranteed.milli);
  REQUIRE(!plan.victims.empty());

  std::map<std::string, const QueuedPod*> by_uid;
  for (const QueuedPod& p : in.pods) by_uid[p.uid] = &p;
  const std::vector<std::string> shared = lineageOf(in, plan.queue);
  std::map<std::string, int64_t> freed;                // per queue outside the waiting lineage
  std::map<std::string, std::set<std::string>> units;  // unit key -> uids
  int64_t total = 0;
  int64_t waiting_milli = 0;
  for (const QueuedPod& p : in.pods) {
    if (!p.bound() && p.queue == plan.queue && (p.key == plan.for_key || p.gang == plan.for_key)) {
      waiting_milli += p.milli;
    }
  }
  CHECK(mine.allocated_milli + waiting_milli <= *mine.spec.guaranteed.milli);
  for (const ReclaimVictim& v : plan.victims) {
    const QueuedPod& p = *by_uid.at(v.uid);
    REQUIRE(p.bound());
    CHECK(v.node == p.node);
    CHECK(v.queue == p.queue);
    CHECK(v.milli == p.milli);
    const QueueStatus& q = statusOf(in, p.queue);
    CHECK(q.spec.preemptible);
    CHECK(q.allocated_milli > q.fair_share.total_milli);
    CHECK(in.now - p.since >= in.min_runtime);
    CHECK(std::find(shared.begin(), shared.end(), p.queue) == shared.end());
    for (const std::string& at : lineageOf(in, p.queue)) {
      if (std::find(shared.begin(), shared.end(), at) != shared.end()) break;
      freed[at] += p.milli;
    }
    units[p.gang.empty() ? p.key : p.gang].insert(p.uid);
    total += p.milli;
  }
  CHECK(total == plan.freed_milli);
  // Gangs whole: every bound member of a victim gang is a victim.
  for (const QueuedPod& p : in.pods) {
    if (p.bound() && !p.gang.empty() && units.contains(p.gang)) CHECK(units[p.gang].contains(p.uid));
  }
  // Guarantees kept (every queue here guarantees in all products together).
  for (const auto& [queue, milli] : freed) {
    const QueueStatus& q = statusOf(in, queue);
    if (q.spec.guaranteed.milli) CHECK(q.allocated_milli - milli >= *q.spec.guaranteed.milli);
  }
  // The round: its pods were pending in the waiting queue, each counted once, and together
  // they ask for no more than the guarantee less what the queue holds.
  std::set<std::string> served_uids;
  int64_t served_milli = 0;
  bool some_evicts = false;
  for (const ReclaimServed& s : plan.served) {
    REQUIRE(s.uids.size() == s.nodes.size());
    REQUIRE(!s.uids.empty());
    served_milli += s.milli;
    some_evicts = some_evicts || s.evicts;
    int64_t milli = 0;
    for (const std::string& uid : s.uids) {
      CHECK(served_uids.insert(uid).second);
      const QueuedPod& p = *by_uid.at(uid);
      CHECK_FALSE(p.bound());
      CHECK(p.queue == plan.queue);
      CHECK((s.gang ? p.gang : p.key) == s.key);
      milli += p.milli;
    }
    CHECK(milli == s.milli);
    if (s.gang) {  // every pending member of a gang
      for (const QueuedPod& p : in.pods) {
        if (!p.bound() && p.gang == s.key) CHECK(served_uids.contains(p.uid));
      }
    }
  }
  CHECK(some_evicts);
  CHECK(mine.allocated_milli + served_milli <= *mine.spec.guaranteed.milli);
  // Above its fair share when its last unit was taken: what is left plus the largest unit.
  std::map<std::string, int64_t> own_freed, largest;
  for (const auto& [key, uids] : units) {
    int64_t milli = 0;
    std::string queue;
    for (const std::string& uid : uids) {
      milli += by_uid.at(uid)->milli;
      queue = by_uid.at(uid)->queue;
    }
    own_freed[queue] += milli;
    largest[queue] = std::max(largest[queue], milli);
  }
  for (const auto& [queue, milli] : own_freed) {
    const QueueStatus& q = statusOf(in, queue);
    CHECK(q.allocated_milli - milli + largest[queue] > q.fair_share.total_milli);
  }
  // Replayed on fresh copies: with the victims gone every served pod fits where the plan put it
  // (no GPU given twice); without the victims it does not; without any one unit it does not.
  std::set<std::string> all;
  for (const ReclaimVictim& v : plan.victims) all.insert(v.uid);
  CHECK(replayFits(in, all, plan));
  CHECK_FALSE(replayFits(in, {}, plan));
  for (const auto& [key, uids] : units) {
    std::set<std::string> without;
    for (const std::string& uid : all) {
      if (!uids.contains(uid)) without.insert(uid);
    }
    INFO("unit " << key << " is not needed");
    CHECK_FALSE(replayFits(in, without, plan));
  }
}

}  // namespace

TEST_CASE("reclaim: every plan on random clusters keeps the rules", "[reclaim][property]") {
  const std::vector<int64_t> sizes = {500, 1000, 1000, 2000, 2000, 4000, 8000};
  const std::vector<int64_t> asks = {1000, 2000, 4000, 8000};
  int plans = 0;
  int gang_plans = 0;
  int gang_victims = 0;
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    Cluster c;
    const int node_count = pick(2, 6);
    for (int i = 0; i < node_count; ++i) c.node("n" + std::to_string(i), pick(0, 1) ? 8 : 4);
    const int queue_count = pick(2, 4);
    std::vector<std::string> queues;
    for (int i = 0; i < queue_count; ++i) {
      queues.push_back("q" + std::to_string(i));
      c.queue(queues.back(), 2000L * pick(0, 6), 2000L * pick(0, 6), pick(0, 3) != 0);
    }
    if (pick(0, 1)) {  // a child of q1, so lineages matter
      c.queue("q1-c", 2000L * pick(0, 2), 2000L * pick(0, 3), pick(0, 3) != 0, "q1");
      queues.push_back("q1-c");
    }
    // Bound pods, some in gangs spread over nodes (each gang in one queue).
    std::map<std::string, std::string> gang_queue;
    int serial = 0;
    for (int i = 0; i < node_count; ++i) {
      const std::string node = "n" + std::to_string(i);
      for (int tries = 0; tries < 8; ++tries) {
        const int64_t milli = sizes[static_cast<size_t>(pick(0, static_cast<int>(sizes.size()) - 1))];
        if (!hasRoom(c.nodeNamed(node), milli)) continue;
        std::string gang;
        std::string queue = queues[static_cast<size_t>(pick(0, static_cast<int>(queues.size()) - 1))];
        if (pick(0, 4) == 0) {
          gang = "ns/g" + std::to_string(pick(0, 2));
          queue = gang_queue.emplace(gang, queue).first->second;
        }
        c.bound("p" + std::to_string(serial++), queue, node, milli, pick(0, 3),
                std::chrono::minutes(pick(1, 60)), gang);
      }
    }
    // Waiting pods and gangs.
    const int waiting = pick(1, 8);
    for (int i = 0; i < waiting; ++i) {
      const std::string queue = queues[static_cast<size_t>(pick(0, static_cast<int>(queues.size()) - 1))];
      const int64_t ask = asks[static_cast<size_t>(pick(0, static_cast<int>(asks.size()) - 1))];
      if (pick(0, 2) == 0) {
        const std::string gang = "ns/w" + std::to_string(i);
        const int members = pick(2, 3);
        for (int m = 0; m < members; ++m) {
          c.pending("w" + std::to_string(i) + "-" + std::to_string(m), queue, ask, pick(0, 3),
                    std::chrono::minutes(pick(1, 30)), gang);
        }
      } else {
        c.pending("w" + std::to_string(i), queue, ask, pick(0, 3), std::chrono::minutes(pick(1, 30)));
      }
    }

    ReclaimInput in = c.input();
    std::optional<ReclaimPlan> plan = planReclaim(in);
    if (!plan) continue;
    INFO("seed " << seed);
    checkPlan(in, *plan);
    ++plans;
    bool gang = false;
    for (const QueuedPod& p : in.pods) gang = gang || (!p.bound() && p.gang == plan->for_key);
    gang_plans += gang ? 1 : 0;
    for (const ReclaimVictim& v : plan->victims) gang_victims += v.gang.empty() ? 0 : 1;
  }
  // The property must see plans of each kind to mean anything.
  CHECK(plans >= 150);
  CHECK(gang_plans >= 30);
  CHECK(gang_victims >= 30);
  WARN("plans " << plans << ", for gangs " << gang_plans << ", gang victims " << gang_victims);
}

namespace {

// The issue's cluster: 20 nodes of 8 GPUs full of batch's 1-GPU pods (pod i started i minutes
// ago), research guaranteed `guaranteed` GPUs with `pending` 1-GPU pods waiting.
void fullOfOneGpuPods(Cluster& c, int64_t batch_fair_milli, int64_t guaranteed, int pending,
                      int gang_size = 1) {
  for (int n = 0; n < 20; ++n) c.node("n" + std::to_string(n), 8);
  c.queue("batch", 0, batch_fair_milli);
  c.queue("research", guaranteed * 1000, guaranteed * 1000, false);
  for (int i = 0; i < 160; ++i) {
    const std::string gang = gang_size > 1 ? "ns/g" + std::to_string(i / gang_size) : "";
    c.bound("b" + std::to_string(i), "batch", "n" + std::to_string(i / 8), 1000, 0,
            std::chrono::minutes(10 + (gang_size > 1 ? i / gang_size : i)), gang);
  }
  for (int i = 0; i < pending; ++i) c.pending("r" + std::to_string(i), "research", 1000);
}

}  // namespace

TEST_CASE("reclaim: one round frees the waiting queue's whole debt, no more", "[reclaim][round]") {
  Cluster c;
  fullOfOneGpuPods(c, 96000, 64, 80);
  ReclaimInput in = c.input();
  std::optional<ReclaimPlan> plan = planReclaim(in);
  REQUIRE(plan);
  checkPlan(in, *plan);
  // 80 wait but research is owed 64: 64 served, 64 evicted, the most recently started first.
  CHECK(plan->victims.size() == 64);
  CHECK(plan->freed_milli == 64000);
  REQUIRE(plan->served.size() == 64);
  std::set<std::string> victims = victimKeys(*plan);
  for (int i = 0; i < 64; ++i) CHECK(victims.contains("ns/b" + std::to_string(i)));
  CHECK(plan->reason.find("and 63 more pods or gangs (63 GPUs) fit: queue batch holds 160 GPUs, above its "
                          "fair share of 96, and gives up 64 (64 pods)") != std::string::npos);
}

TEST_CASE("reclaim: a round stops where the victims' queue reaches its fair share", "[reclaim][round]") {
  // batch may give up only what it holds above its fair share of 150: 10 GPUs.
  Cluster c;
  fullOfOneGpuPods(c, 150000, 64, 80);
  ReclaimInput in = c.input();
  std::optional<ReclaimPlan> plan = planReclaim(in);
  REQUIRE(plan);
  checkPlan(in, *plan);
  CHECK(plan->victims.size() == 10);
  CHECK(plan->served.size() == 10);
}

TEST_CASE("reclaim: a round takes victim gangs whole and fills what they free", "[reclaim][round]") {
  // 4-member gangs as victims: 16 gangs free the 64 GPUs; the 3 spare GPUs a gang frees for one
  // pod go to the next pods, so no gang is taken for room that is already free.
  Cluster c;
  fullOfOneGpuPods(c, 96000, 64, 80, 4);
  ReclaimInput in = c.input();
  std::optional<ReclaimPlan> plan = planReclaim(in);
  REQUIRE(plan);
  checkPlan(in, *plan);
  CHECK(plan->victims.size() == 64);
  CHECK(plan->served.size() == 64);
  std::map<std::string, int> per_gang;
  for (const ReclaimVictim& v : plan->victims) ++per_gang[v.gang];
  CHECK(per_gang.size() == 16);
  for (const auto& [gang, n] : per_gang) CHECK(n == 4);
  int evicting = 0;
  for (const ReclaimServed& s : plan->served) evicting += s.evicts ? 1 : 0;
  CHECK(evicting == 16);
}

TEST_CASE("reclaim: a round serves pods that fit already first and evicts only for the rest",
          "[reclaim][round]") {
  Cluster c;
  fullOfOneGpuPods(c, 96000, 64, 80);
  c.node("spare", 8);  // 8 GPUs free: 8 of the 64 need no eviction
  ReclaimInput in = c.input();
  std::optional<ReclaimPlan> plan = planReclaim(in);
  REQUIRE(plan);
  checkPlan(in, *plan);
  CHECK(plan->served.size() == 64);
  CHECK(plan->victims.size() == 56);
}
