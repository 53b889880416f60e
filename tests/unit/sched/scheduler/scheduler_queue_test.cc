// Queues through the Scheduler: membership errors, limit and fair-share admission in filter,
// gangs admitted whole, accounting through reserve/bind/release, and gang- and queue-aware
// preemption.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/scheduler/scheduler.h"

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
