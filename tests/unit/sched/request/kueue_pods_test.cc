// Pods Kueue controls: gated pods are no demand; pods Kueue's topology-aware scheduling placed
// are filtered on their own (no gang plan, no topology, no fair-share hold-back).
#include "troupe/sched/request/kueue_pods.h"

#include <catch2/catch.hpp>
#include <set>

#include "support/fixtures.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

// A member of a Kueue pod group of `size` with `gpus` GPUs in queue `queue`, as Kueue's TAS
// leaves it once ungated: the tas label and a nodeSelector pinning it to `node`.
PodFacts tasMember(const std::string& group, int index, int size, int gpus, const std::string& node,
                   const std::string& queue = "") {
  PodFacts p = gpuPod(group + "-" + std::to_string(index), gpus, {{kKueueTotal, std::to_string(size)}});
  p.labels[kKueueGroup] = group;
  p.labels[kKueueTasLabel] = "true";
  if (!queue.empty()) p.labels[kKueueQueueName] = queue;
  if (!node.empty()) p.node_selector[kHostnameLabel] = node;
  return p;
}

QueueStatus statusOf(const Scheduler& s, const std::string& queue) {
  for (const QueueStatus& q : s.queueStatuses()) {
    if (q.spec.name == queue) return q;
  }
  FAIL("no queue " << queue);
  return {};
}

QueueSpec queue(const std::string& name) {
  QueueSpec q;
  q.name = name;
  return q;
}

}  // namespace

TEST_CASE("kueue: which pods count as placed by TAS", "[kueue]") {
  const std::vector<std::string>& levels = model::defaultTopologyLevels();
  PodFacts p = tasMember("g", 0, 2, 1, "gpu-3");
  CHECK(kueuePlaced(p, levels));
  p.labels[kKueueTasLabel] = " True ";
  CHECK(kueuePlaced(p, levels));
  p.labels[kKueueTasLabel] = "false";
  CHECK_FALSE(kueuePlaced(p, levels));
  p.labels.erase(kKueueTasLabel);
  CHECK_FALSE(kueuePlaced(p, levels));  // a nodeSelector alone is the user's, not Kueue's

  PodFacts rack = tasMember("g", 0, 2, 1, "");
  CHECK_FALSE(kueuePlaced(rack, levels));  // labelled, but not assigned yet
  rack.node_selector["troupe.dev/rack"] = "r1";
  CHECK(kueuePlaced(rack, levels));  // a configured level
  PodFacts hall = tasMember("g", 0, 2, 1, "");
  hall.node_selector["example.com/hall"] = "h1";
  CHECK(kueuePlaced(hall, {"example.com/hall"}));
  CHECK_FALSE(kueuePlaced(hall, levels));  // neither configured nor a preset's key
  PodFacts cloud = tasMember("g", 0, 2, 1, "");
  cloud.node_selector["cloud.google.com/gce-topology-host"] = "h-17";  // a preset's key
  CHECK(kueuePlaced(cloud, {}));
  PodFacts other = tasMember("g", 0, 2, 1, "");
  other.node_selector["example.com/pool"] = "a";
  CHECK_FALSE(kueuePlaced(other, levels));
  other.node_selector[kHostnameLabel] = "";
  CHECK_FALSE(kueuePlaced(other, levels));

  CHECK_FALSE(schedulingGated(p));
  p.scheduling_gates = {"kueue.x-k8s.io/admission"};
  CHECK(schedulingGated(p));
}

TEST_CASE("kueue: gated pods are no demand until the gate goes", "[kueue][queue]") {
  Scheduler s{SchedulerConfig{}};
  REQUIRE(s.upsertNode(gpuNode("n0", 8)).isOk());
  s.setQueues(QueueTree::build({queue("team")}));
  const auto now = QueueClock::now();
  std::vector<PodFacts> pods;
  for (int i = 0; i < 3; ++i) {
    PodFacts p = tasMember("job", i, 3, 2, "", "team");
    p.scheduling_gates = {"kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"};
    s.notePod(p, now);
    pods.push_back(p);
  }
  PodFacts user_gated = gpuPod("held", 4, {{kQueueKey, "team"}});
  user_gated.scheduling_gates = {"example.com/wait"};
  s.notePod(user_gated, now);
  CHECK(statusOf(s, "team").pending_pods == 0);
  CHECK(statusOf(s, "team").pending_milli == 0);

  // Kueue admits the workload: it lifts the gates, and the pods count as pending.
  for (PodFacts& p : pods) {
    p.scheduling_gates.clear();
    s.notePod(p, now);
  }
  CHECK(statusOf(s, "team").pending_pods == 3);
  CHECK(statusOf(s, "team").pending_milli == 6000);
  // A gate put back (Kueue evicting the workload to requeue it) takes it out again.
  pods[0].scheduling_gates = {"kueue.x-k8s.io/admission"};
  s.notePod(pods[0], now);
  CHECK(statusOf(s, "team").pending_pods == 2);
  // A bound pod that still lists a gate (impossible through the API, but cheap to handle)
  // holds its GPUs.
  PodFacts bound = pods[1];
  bound.node_name = "n0";
  bound.scheduling_gates = {"kueue.x-k8s.io/admission"};
  s.notePod(bound, now);
  CHECK(statusOf(s, "team").running_pods == 1);
}

TEST_CASE("kueue: a TAS gang's members are filtered on their own on Kueue's nodes", "[kueue][gang]") {
  Scheduler s{SchedulerConfig{}};
  std::vector<std::string> nodes;
  for (int i = 0; i < 4; ++i) {
    model::NodeFacts f = gpuNode("n" + std::to_string(i), 8);
    f.labels["troupe.dev/rack"] = i < 2 ? "r0" : "r1";
    REQUIRE(s.upsertNode(f).isOk());
    nodes.push_back(f.name);
  }
  // Four members pinned across two racks, with a required rack Troupe would otherwise enforce:
  // each passes on the one node kube-scheduler offers, and no gang plan holds GPUs.
  for (int i = 0; i < 4; ++i) {
    PodFacts p = tasMember("tas", i, 4, 8, nodes[static_cast<size_t>(i)]);
    p.annotations[kAnnotationTopologyRequired] = "rack";
    FilterResult r = s.filter(p, {nodes[static_cast<size_t>(i)]});
    INFO(i);
    REQUIRE(r.passed == std::vector<std::string>{nodes[static_cast<size_t>(i)]});
    // Troupe picks the GPUs: reserve works without a gang barrier.
    Result<model::Allocation> a = s.reserve(p.uid, p.ns, p.name, nodes[static_cast<size_t>(i)]);
    REQUIRE(a.isOk());
    CHECK(a.value().gpus.size() == 8);
  }
  CHECK(s.summary().gangs.held_gpus == 0);
  CHECK(s.summary().gangs.planned == 0);

  SECTION("the same gang without Kueue's assignment is planned whole and refused across racks") {
    Scheduler plain{SchedulerConfig{}};
    for (int i = 0; i < 4; ++i) {
      model::NodeFacts f = gpuNode("n" + std::to_string(i), 8);
      f.labels["troupe.dev/rack"] = i < 2 ? "r0" : "r1";
      REQUIRE(plain.upsertNode(f).isOk());
    }
    PodFacts p = tasMember("tas", 0, 4, 8, "");
    p.annotations[kAnnotationTopologyRequired] = "rack";
    FilterResult r = plain.filter(p, nodes);
    CHECK(r.passed.empty());
    CHECK_THAT(r.unresolvable.begin()->second, Catch::Contains("in one rack"));
  }
}

TEST_CASE("kueue: a placed pod is not held back for fair share, and its GPUs count", "[kueue][queue]") {
  Scheduler s{SchedulerConfig{}};
  std::vector<std::string> nodes{"n0", "n1"};
  for (const std::string& n : nodes) REQUIRE(s.upsertNode(gpuNode(n, 8)).isOk());
  QueueSpec capped = queue("a");
  capped.limit.milli = 4000;
  s.setQueues(QueueTree::build({capped, queue("b")}));
  // Queue a is at its limit: a plain pod of a is refused ...
  PodFacts first = gpuPod("a-0", 4, {{kQueueKey, "a"}});
  REQUIRE(s.filter(first, nodes).passed.size() >= 1);
  REQUIRE(s.reserve(first.uid, first.ns, first.name, "n0").isOk());
  PodFacts plain = gpuPod("a-1", 4, {{kQueueKey, "a"}});
  FilterResult r = s.filter(plain, nodes);
  CHECK(r.passed.empty());
  CHECK(r.categories.at("queue") > 0);
  // ... a pod Kueue admitted and placed is not: Kueue's quota is the admission.
  PodFacts placed = tasMember("k", 0, 1, 4, "n1", "a");
  r = s.filter(placed, {"n1"});
  REQUIRE(r.passed == std::vector<std::string>{"n1"});
  CHECK(r.categories.count("queue") == 0);
  REQUIRE(s.reserve(placed.uid, placed.ns, placed.name, "n1").isOk());
  CHECK(statusOf(s, "a").allocated_milli == 8000);
}
