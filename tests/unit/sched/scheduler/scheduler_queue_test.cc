// Queues through the Scheduler: membership errors, limit and fair-share admission in filter,
// gangs admitted whole, limits checked again at bind, accounting through reserve/bind/release,
// and gang- and queue-aware preemption.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/scheduler/scheduler.h"
#include "troupe/sched/scheduler/wake_planner.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

const std::string kH100 = "NVIDIA-H100-80GB-HBM3";
const std::string kA100 = "NVIDIA-A100-SXM4-80GB";

struct Fixture {
  Clock::time_point t = Clock::time_point{} + std::chrono::hours(1);
  Scheduler s{config()};
  std::vector<std::string> nodes{"h0", "h1", "a0"};

  SchedulerConfig config() {
    SchedulerConfig c;
    c.clock = [this] { return t; };
    c.gang.timeout = std::chrono::seconds(30);
    return c;
  }
  Fixture() {
    REQUIRE(s.upsertNode(gpuNode("h0", 8, kH100)).isOk());
    REQUIRE(s.upsertNode(gpuNode("h1", 8, kH100)).isOk());
    REQUIRE(s.upsertNode(gpuNode("a0", 8, kA100, 81920)).isOk());
  }
  static PodFacts pod(const std::string& name, int gpus, const std::string& queue, StringMap extra = {}) {
    extra[kQueueKey] = queue;
    return gpuPod(name, gpus, extra);
  }
  // filter, then reserve on the first passing node (or `node`); the allocation's node.
  std::string place(const PodFacts& p, const std::string& node = "") {
    FilterResult r = s.filter(p, nodes);
    INFO(p.name);
    REQUIRE(!r.passed.empty());
    const std::string target = node.empty() ? r.passed.front() : node;
    REQUIRE(std::find(r.passed.begin(), r.passed.end(), target) != r.passed.end());
    Result<model::Allocation> a = s.reserve(p.uid, p.ns, p.name, target);
    INFO(a.status().message());
    REQUIRE(a.isOk());
    return target;
  }
  QueueStatus status(const std::string& queue) {
    for (const QueueStatus& q : s.queueStatuses()) {
      if (q.spec.name == queue) return q;
    }
    FAIL("no queue " << queue);
    return {};
  }
};

QueueSpec queue(const std::string& name, double weight = 1) {
  QueueSpec q;
  q.name = name;
  q.weight = weight;
  return q;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("queues off: filter and statuses as before", "[queue][scheduler]") {
  Fixture f;
  FilterResult r = f.s.filter(Fixture::pod("p", 2, "nope"), f.nodes);
  CHECK(r.passed.size() == 3);
  CHECK(r.categories.count("queue") == 0);
  CHECK(f.s.queueStatuses().empty());
}

TEST_CASE("queues: an unknown or invalid queue refuses every node as unresolvable", "[queue][scheduler]") {
  Fixture f;
  f.s.setQueues(QueueTree::build({queue("team-a"), queue("bad", 0)}));
  FilterResult r = f.s.filter(Fixture::pod("p", 2, "nope"), f.nodes);
  CHECK(r.passed.empty());
  REQUIRE(r.unresolvable.size() == 3);
  CHECK(r.categories.at("queue") == 3);
  const std::string reason = r.unresolvable.at("h0");
  CHECK(reason.rfind("troupe: queue: annotation troupe.dev/queue=\"nope\" names no queue", 0) == 0);
  r = f.s.filter(Fixture::pod("q", 2, "bad"), f.nodes);
  CHECK(contains(r.unresolvable.at("a0"), "weight 0"));
  // A pod without GPUs is none of the queues' business.
  r = f.s.filter(Fixture::pod("cpu", 0, "nope"), f.nodes);
  CHECK(r.passed.size() == 3);
}

TEST_CASE("queues: the limit holds in all and per product, and frees on release", "[queue][scheduler]") {
  Fixture f;
  QueueSpec a = queue("a");
  a.limit.milli = 10000;
  a.limit.product_milli[kH100] = 4000;
  f.s.setQueues(QueueTree::build({a}));
  const PodFacts p1 = Fixture::pod("p1", 4, "a");
  f.place(p1, "h0");
  // No more H100 for a, A100 still.
  FilterResult r = f.s.filter(Fixture::pod("p2", 2, "a"), f.nodes);
  CHECK(r.passed == std::vector<std::string>{"a0"});
  REQUIRE(r.failed.size() == 2);
  CHECK(r.categories.at("queue") == 2);
  CHECK(r.failed.at("h1").rfind("troupe: queue a is at its limit of 4 " + kH100 + " GPUs: it holds 4", 0) ==
        0);
  f.place(Fixture::pod("p2", 6, "a"), "a0");
  r = f.s.filter(Fixture::pod("p3", 1, "a"), f.nodes);
  CHECK(r.passed.empty());
  CHECK(r.failed.at("a0") ==
        "troupe: queue a is at its limit: it holds 10 of 10 GPUs and this pod needs 1 more");
  CHECK(f.status("a").allocated_milli == 10000);
  CHECK(f.status("a").running_pods == 2);
  CHECK(f.s.release(p1.uid));
  r = f.s.filter(Fixture::pod("p3", 1, "a"), f.nodes);
  CHECK(r.passed.size() == 3);
  f.s.forgetPod("uid-p2");
  CHECK(f.status("a").allocated_milli == 0);
  CHECK(f.status("a").pending_pods == 1);  // p3, noted by its filter
}

TEST_CASE("queues: beyond its fair share a queue waits for one whose pods fit", "[queue][scheduler]") {
  Fixture f;
  REQUIRE(f.s.upsertNode(gpuNode("h2", 8, kH100)).isOk());
  f.nodes = {"h0", "h1", "h2", "a0"};  // 24 H100 and 8 A100
  f.s.setQueues(QueueTree::build({queue("a"), queue("b")}));
  for (int i = 0; i < 4; ++i) f.place(Fixture::pod("a" + std::to_string(i), 4, "a"), i < 2 ? "h0" : "h1");
  // b asks for 20 GPUs (five pending 4-GPU pods, each fitting on h2 or a0): together the two
  // queues want more than the 32 GPUs.
  for (int i = 0; i < 5; ++i) f.s.filter(Fixture::pod("b" + std::to_string(i), 4, "b"), f.nodes);
  f.t += std::chrono::seconds(2);
  f.s.tick();
  CHECK(f.status("a").fair_share.total_milli < 18000);  // with a4, a would be above its share
  FilterResult r = f.s.filter(Fixture::pod("a4", 2, "a"), f.nodes);
  CHECK(r.passed.empty());
  CHECK(r.categories.at("queue") == 2);  // h2 and a0; h0 and h1 are full anyway
  REQUIRE(r.failed.contains("h2"));
  INFO(r.failed.at("h2"));
  CHECK(
      r.failed.at("h2").rfind("troupe: queue a is above its fair share: with this pod it would hold 18 GPUs, "
                              "its fair share is ",
                              0) == 0);
  CHECK(contains(r.failed.at("h2"), "; queue b holds 0 of its fair share of "));
  CHECK(contains(r.failed.at("h2"), " and has pending pods that fit"));
  CHECK(f.status("b").pending_fits);
  CHECK(contains(f.status("a").explanation, "holds 16"));
  // b's pods are admitted (each keeps b within its share) ...
  CHECK(f.s.filter(Fixture::pod("b0", 4, "b"), f.nodes).passed.size() == 2);
  f.place(Fixture::pod("b0", 4, "b"), "h2");
  // ... and once b wants no more, nobody waits and a may use what is left.
  for (int i = 1; i < 5; ++i) f.s.forgetPod("uid-b" + std::to_string(i));
  f.t += std::chrono::seconds(2);
  f.s.tick();
  r = f.s.filter(Fixture::pod("a4", 2, "a"), f.nodes);
  CHECK(r.categories.count("queue") == 0);
  CHECK(r.passed == std::vector<std::string>{"h2", "a0"});
}

TEST_CASE("queues: a gang is admitted whole, and its bound members are accounted", "[queue][scheduler]") {
  Fixture f;
  QueueSpec a = queue("a");
  a.limit.milli = 8000;
  f.s.setQueues(QueueTree::build({a}));
  auto member = [](const std::string& gang, int i, int gpus, int size) {
    return Fixture::pod(gang + "-" + std::to_string(i), gpus, "a",
                        {{kGangName, gang}, {kGangSize, std::to_string(size)}});
  };
  // 3 x 4 GPUs = 12 > 8: refused for every node, before any plan holds GPUs.
  FilterResult r = f.s.filter(member("big", 0, 4, 3), f.nodes);
  CHECK(r.passed.empty());
  CHECK(r.failed.size() == 3);
  CHECK(contains(r.failed.at("h0"),
                 "troupe: queue a is at its limit: it holds 0 of 8 GPUs and gang default/big "
                 "needs 12 more"));
  CHECK(f.s.gangs().empty());
  // 2 x 4 = 8 fits the limit: planned and bound through the barrier.
  std::vector<std::optional<Result<model::Allocation>>> results(2);
  for (int i = 0; i < 2; ++i) {
    const PodFacts p = member("ok", i, 4, 2);
    r = f.s.filter(p, f.nodes);
    REQUIRE(r.passed.size() == 1);
    f.s.bind(p.uid, p.ns, p.name, r.passed.front(), [&results, i](Result<model::Allocation> res) {
      results[static_cast<size_t>(i)] = std::move(res);
    });
  }
  REQUIRE(results[0]);
  REQUIRE(results[1]);
  CHECK(results[0]->isOk());
  CHECK(results[1]->isOk());
  CHECK(f.status("a").allocated_milli == 8000);
  CHECK(f.status("a").running_pods == 2);
}

// kube-scheduler binds asynchronously: it filters the next pod while the last one's bind is in
// flight, so both pass the filter's admission. The bind checks the limit again.
TEST_CASE("queues: two pods filtered before either binds: the second bind is refused at the limit",
          "[queue][scheduler][bind-limit]") {
  Fixture f;
  QueueSpec a = queue("a");
  a.limit.milli = 1000;
  f.s.setQueues(QueueTree::build({a}));
  const PodFacts p1 = Fixture::pod("p1", 1, "a");
  const PodFacts p2 = Fixture::pod("p2", 1, "a");
  REQUIRE(f.s.filter(p1, f.nodes).passed.size() == 3);
  REQUIRE(f.s.filter(p2, f.nodes).passed.size() == 3);  // p1 is not bound yet
  std::optional<Result<model::Allocation>> b1, b2;
  f.s.bind(p1.uid, p1.ns, p1.name, "h0", [&](Result<model::Allocation> r) { b1 = std::move(r); });
  f.s.bind(p2.uid, p2.ns, p2.name, "h1", [&](Result<model::Allocation> r) { b2 = std::move(r); });
  REQUIRE(b1);
  REQUIRE(b2);
  CHECK(b1->isOk());
  REQUIRE_FALSE(b2->isOk());
  CHECK(
      b2->status().message() ==
      "pod default/p2 is not bound to node h1: troupe: queue a is at its limit: it holds 1 of 1 GPU and this "
      "pod needs 1 more (pods of the queue bound after this pod passed Troupe's filter; it is filtered again "
      "and waits there until its queue has room)");
  CHECK_FALSE(f.s.allocationOf(p2.uid));
  CHECK(f.status("a").allocated_milli == 1000);
  // kube-scheduler retries failed Binds: p1's retry is the same allocation, counted once; p2's is
  // refused again.
  Result<model::Allocation> again = f.s.reserve(p1.uid, p1.ns, p1.name, "h0");
  CHECK(again.isOk());
  CHECK_FALSE(f.s.reserve(p2.uid, p2.ns, p2.name, "h1").isOk());
  CHECK(f.status("a").allocated_milli == 1000);
  CHECK(f.status("a").running_pods == 1);
  CHECK(f.status("a").pending_pods == 1);
  // Filtered again, p2 is refused with the limit as the reason ...
  FilterResult r = f.s.filter(p2, f.nodes);
  CHECK(r.passed.empty());
  CHECK(r.failed.at("h1") ==
        "troupe: queue a is at its limit: it holds 1 of 1 GPU and this pod needs 1 more");
  // ... and woken once p1 is gone, then bound.
  WakePlanner planner;
  CHECK(f.s.planWakes(planner).empty());
  CHECK(f.s.release(p1.uid));
  f.s.forgetPod(p1.uid);
  const std::vector<WakeCandidate> woken = f.s.planWakes(planner);
  REQUIRE(woken.size() == 1);
  CHECK(woken.front().uid == p2.uid);
  f.place(p2);
  CHECK(f.status("a").allocated_milli == 1000);
}

TEST_CASE("queues: a parent's limit is checked again at bind, and only limits are",
          "[queue][scheduler][bind-limit]") {
  Fixture f;
  QueueSpec org = queue("org");
  org.limit.milli = 8000;
  QueueSpec x = queue("x");
  x.parent = "org";
  QueueSpec y = queue("y");
  y.parent = "org";
  y.limit.product_milli[kH100] = 2000;
  f.s.setQueues(QueueTree::build({org, x, y}));
  const PodFacts px = Fixture::pod("px", 6, "x");
  const PodFacts py = Fixture::pod("py", 4, "y");
  const PodFacts py2 = Fixture::pod("py2", 2, "y");
  REQUIRE(f.s.filter(px, f.nodes).passed.size() == 3);
  REQUIRE(f.s.filter(py, f.nodes).passed.size() == 1);  // a0 only: y's H100 limit is 2
  REQUIRE(f.s.filter(py2, f.nodes).passed.size() == 3);
  REQUIRE(f.s.reserve(px.uid, px.ns, px.name, "h0").isOk());
  // 6 + 4 > 8: the parent's limit, named.
  Result<model::Allocation> r = f.s.reserve(py.uid, py.ns, py.name, "a0");
  REQUIRE_FALSE(r.isOk());
  CHECK(contains(r.status().message(),
                 "troupe: queue y: its parent queue org is at its limit: it holds 6 of 8 GPUs and this pod "
                 "needs 4 more"));
  // 6 + 2 = 8: within every limit, bound.
  CHECK(f.s.reserve(py2.uid, py2.ns, py2.name, "h1").isOk());
  CHECK(f.status("org").allocated_milli == 8000);
}

TEST_CASE("queues: the bind check leaves gangs admitted whole and queues turned off alone",
          "[queue][scheduler][bind-limit]") {
  Fixture f;
  QueueSpec a = queue("a");
  a.limit.milli = 8000;
  f.s.setQueues(QueueTree::build({a}));
  auto member = [](const std::string& gang, int i) {
    return Fixture::pod(gang + "-" + std::to_string(i), 4, "a", {{kGangName, gang}, {kGangSize, "2"}});
  };
  // A gang admitted whole at 8 of 8 binds every member through its barrier, though the first
  // member's reservation fills half the limit before the second is reserved.
  std::vector<std::optional<Result<model::Allocation>>> results(2);
  for (int i = 0; i < 2; ++i) {
    const PodFacts p = member("g", i);
    FilterResult r = f.s.filter(p, f.nodes);
    REQUIRE(r.passed.size() == 1);
    f.s.bind(p.uid, p.ns, p.name, r.passed.front(), [&results, i](Result<model::Allocation> res) {
      results[static_cast<size_t>(i)] = std::move(res);
    });
  }
  REQUIRE(results[0]);
  REQUIRE(results[1]);
  CHECK(results[0]->isOk());
  CHECK(results[1]->isOk());
  CHECK(f.status("a").allocated_milli == 8000);
  // Queues turned off between filter and bind: nothing to check.
  const PodFacts late = Fixture::pod("late", 1, "a");
  REQUIRE(f.s.filter(late, f.nodes).passed.empty());
  f.s.setQueues(QueueTree{});
  const FilterResult r = f.s.filter(late, f.nodes);
  REQUIRE_FALSE(r.passed.empty());
  CHECK(f.s.reserve(late.uid, late.ns, late.name, r.passed.front()).isOk());
}

TEST_CASE("queues: notePod counts valid GPU pods only", "[queue][scheduler]") {
  Fixture f;
  f.s.setQueues(QueueTree::build({queue("a")}));
  PodFacts bound = Fixture::pod("bound", 2, "a");
  bound.node_name = "h0";
  f.s.notePod(bound, f.t);
  f.s.notePod(Fixture::pod("pending", 3, "a"), f.t);
  f.s.notePod(Fixture::pod("elsewhere", 3, "nope"), f.t);
  PodFacts broken = Fixture::pod("broken", 1, "a");
  broken.annotations[kAnnotationGpuTopology] = "sideways";
  f.s.notePod(broken, f.t);
  QueueStatus a = f.status("a");
  CHECK(a.allocated_milli == 2000);
  CHECK(a.allocated.at(kH100) == 2000);
  CHECK(a.pending_milli == 3000);
  PodFacts done = bound;
  done.phase = "Succeeded";
  f.s.notePod(done, f.t);
  CHECK(f.status("a").allocated_milli == 0);
}

TEST_CASE("queues: a namespace's default queue, and the cluster default", "[queue][scheduler]") {
  Fixture f;
  f.s.setQueues(QueueTree::build({queue("team-b")}));
  f.place(gpuPod("plain", 1));  // namespace "default" names no queue: the cluster default
  f.s.setNamespaceQueue("default", "team-b");
  f.place(gpuPod("in-b", 2));
  f.place(Fixture::pod("own", 4, "default"));  // its own annotation wins
  CHECK(f.status("default").allocated_milli == 5000);
  CHECK(f.status("team-b").allocated_milli == 2000);
  f.s.setNamespaceQueue("default", "gone");
  FilterResult r = f.s.filter(gpuPod("lost", 1), f.nodes);
  CHECK(r.unresolvable.size() == 3);
  CHECK(contains(r.unresolvable.at("h0"), "troupe.dev/default-queue=\"gone\""));
  f.s.setNamespaceQueue("default", "");
  CHECK(f.s.filter(gpuPod("back", 1), f.nodes).passed.size() == 3);
}

TEST_CASE("queues: preempt keeps gangs whole and honours queues", "[queue][scheduler]") {
  Fixture f;
  QueueSpec prod = queue("prod");
  prod.preemptible = false;
  QueueSpec research = queue("research");
  research.guaranteed.milli = 4000;
  QueueSpec capped = queue("capped");
  capped.limit.milli = 2000;
  f.s.setQueues(QueueTree::build({prod, research, capped, queue("batch")}));
  // Bound pods as the adapter reports them (recordAllocation, then notePod).
  auto run = [&](const std::string& name, const std::string& q, const std::string& node,
                 std::vector<int> gpus, const std::string& gang = "") {
    model::Allocation a;
    a.pod_uid = "uid-" + name;
    a.pod_key = "default/" + name;
    a.node = node;
    a.gpus = gpus;
    a.gang = gang;
    REQUIRE(f.s.recordAllocation(a).isOk());
    StringMap extra;
    if (!gang.empty()) {
      extra[kGangName] = gang.substr(gang.find('/') + 1);
      extra[kGangSize] = "2";
    }
    PodFacts p = Fixture::pod(name, static_cast<int>(gpus.size()), q, extra);
    p.node_name = node;
    f.s.notePod(p, f.t);
  };
  run("prod-0", "prod", "h0", {0, 1, 2, 3});
  run("batch-0", "batch", "h0", {4, 5, 6, 7});
  run("res-0", "research", "h1", {0, 1, 2, 3});
  run("g-0", "batch", "h1", {4, 5});
  run("g-1", "batch", "h1", {6, 7}, "default/g");
  run("g-2", "batch", "a0", {0, 1}, "default/split");
  run("g-3", "batch", "a0", {2, 3});
  const PodFacts preemptor = Fixture::pod("urgent", 4, "batch");

  // A non-preemptible queue's pod vetoes its node; a batch pod alone is fine.
  auto out = f.s.preempt(preemptor, {{"h0", {"uid-prod-0"}}});
  CHECK(out.empty());
  out = f.s.preempt(preemptor, {{"h0", {"uid-batch-0"}}});
  CHECK(out["h0"] == std::vector<std::string>{"uid-batch-0"});
  // research holds exactly its guarantee: evicting its pod is vetoed.
  out = f.s.preempt(preemptor, {{"h1", {"uid-res-0"}}});
  CHECK(out.empty());
  // A victim's gang members on the same node join it (g-0 is no member; g-1's gang is only there).
  out = f.s.preempt(Fixture::pod("small", 2, "batch"), {{"h1", {"uid-g-1"}}});
  CHECK(out["h1"] == std::vector<std::string>{"uid-g-1"});
  // A gang that also runs elsewhere is evicted whole or not at all: vetoed.
  model::Allocation other;
  other.pod_uid = "uid-g-4";
  other.pod_key = "default/g-4";
  other.node = "h0";
  other.gang = "default/split";
  REQUIRE(f.s.release("uid-batch-0"));
  other.gpus = {4, 5};
  PodFacts m = Fixture::pod("g-4", 2, "batch", {{kGangName, "split"}, {kGangSize, "2"}});
  m.node_name = "h0";
  REQUIRE(f.s.recordAllocation(other).isOk());
  f.s.notePod(m, f.t);
  out = f.s.preempt(Fixture::pod("small2", 2, "batch"), {{"a0", {"uid-g-2"}}});
  CHECK(out.empty());
  // A preemptor whose own queue is at its limit gets no victims.
  out = f.s.preempt(Fixture::pod("greedy", 4, "capped"), {{"a0", {"uid-g-3"}}});
  CHECK(out.empty());
  out = f.s.preempt(Fixture::pod("modest", 2, "capped"), {{"a0", {"uid-g-3"}}});
  CHECK(out["a0"] == std::vector<std::string>{"uid-g-3"});
}

TEST_CASE("queues: a victim's gang members on the same node are evicted with it", "[queue][scheduler]") {
  Fixture f;
  f.s.setQueues(QueueTree::build({queue("batch")}));
  for (int i = 0; i < 2; ++i) {
    model::Allocation a;
    a.pod_uid = "uid-m" + std::to_string(i);
    a.pod_key = "default/m" + std::to_string(i);
    a.node = "h0";
    a.gpus = {4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3};
    a.gang = "default/pair";
    REQUIRE(f.s.recordAllocation(a).isOk());
  }
  auto out = f.s.preempt(Fixture::pod("big", 8, "batch"), {{"h0", {"uid-m0"}}});
  REQUIRE(out.count("h0") == 1);
  std::vector<std::string> victims = out["h0"];
  std::sort(victims.begin(), victims.end());
  CHECK(victims == std::vector<std::string>{"uid-m0", "uid-m1"});
}
