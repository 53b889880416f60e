// The Scheduler's reclaim: a plan from the live model and queue book, one plan in flight until
// its victims are gone, its deadline passes or the adapter gives it up, evictions counted per
// queue, and the victims' nodes kept for the waiting queue meanwhile.
#include <catch2/catch.hpp>
#include <set>

#include "support/fixtures.h"
#include "support/scheduler_fixture.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::FakeClock;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

QueueSpec queue(const std::string& name, int64_t guaranteed_milli = 0) {
  QueueSpec q;
  q.name = name;
  if (guaranteed_milli > 0) q.guaranteed.milli = guaranteed_milli;
  return q;
}

PodFacts queuedPod(const std::string& name, int gpus, const std::string& q) {
  PodFacts p = gpuPod(name, gpus, {{kQueueKey, q}});
  return p;
}

const QueueStatus& statusOf(const std::vector<QueueStatus>& all, const std::string& name) {
  for (const QueueStatus& s : all) {
    if (s.spec.name == name) return s;
  }
  FAIL("no status for " << name);
  return all.front();
}

// Two 8-GPU nodes filled by four 4-GPU pods of queue batch (b0, b1 on n0; b2, b3 on n1) that
// have run ten minutes; research is guaranteed 8 GPUs and holds none.
struct Fleet {
  FakeClock clock;
  std::unique_ptr<Scheduler> s;

  explicit Fleet(bool reclaim = true, bool queues = true, int64_t research_guaranteed = 8000) {
    SchedulerConfig c;
    c.clock = [this] { return clock.t; };
    c.reclaim.min_runtime = std::chrono::minutes(5);
    c.reclaim.timeout = std::chrono::minutes(2);
    c.reclaim.enabled = reclaim;
    s = std::make_unique<Scheduler>(c);
    if (queues) s->setQueues(QueueTree::build({queue("batch"), queue("research", research_guaranteed)}));
    REQUIRE(s->upsertNode(gpuNode("n0", 8)).isOk());
    REQUIRE(s->upsertNode(gpuNode("n1", 8)).isOk());
    for (int i = 0; i < 4; ++i) {
      const std::string node = i < 2 ? "n0" : "n1";
      bindOn(queuedPod("b" + std::to_string(i), 4, "batch"), node);
    }
    clock.advance(std::chrono::minutes(10));
  }

  void bindOn(const PodFacts& p, const std::string& node) {
    FilterResult f = s->filter(p, {node});
    REQUIRE(f.passed == std::vector<std::string>{node});
    REQUIRE(s->reserve(p.uid, p.ns, p.name, node).isOk());
  }

  // A research pod that waits: filtered (so the book knows it), then a refresh.
  PodFacts waiting(const std::string& name, int gpus) {
    PodFacts p = queuedPod(name, gpus, "research");
    FilterResult f = s->filter(p, {"n0", "n1"});
    REQUIRE(f.passed.empty());
    clock.advance(std::chrono::seconds(2));
    s->tick();
    return p;
  }
};

std::vector<std::string> victimUids(const ReclaimPlan& plan) {
  std::vector<std::string> out;
  for (const ReclaimVictim& v : plan.victims) out.push_back(v.uid);
  return out;
}

}  // namespace

TEST_CASE("scheduler reclaim: a plan for the waiting pod, one at a time", "[reclaim][scheduler]") {
  Fleet f;
  f.waiting("train-0", 4);
  std::optional<ReclaimPlan> plan = f.s->planReclaim();
  REQUIRE(plan);
  CHECK(plan->queue == "research");
  CHECK(plan->for_key == "default/train-0");
  REQUIRE(plan->victims.size() == 1);
  CHECK(plan->victims[0].queue == "batch");
  CHECK(plan->freed_milli == 4000);
  CHECK(plan->reason.find("troupe: reclaimed for queue research (holds 0 of 8 guaranteed GPUs) so that pod "
                          "default/train-0 (4 GPUs) fits: queue batch holds 16 GPUs") == 0);

  // In flight: no second plan, even for another waiting pod.
  f.waiting("train-1", 4);
  CHECK_FALSE(f.s->planReclaim());

  // The victim is gone: the plan ends, and train-0 fits now, so the next plan is for train-1.
  CHECK(f.s->release(plan->victims[0].uid));
  f.s->forgetPod(plan->victims[0].uid);
  PodFacts train0 = queuedPod("train-0", 4, "research");
  FilterResult fits = f.s->filter(train0, {"n0", "n1"});
  REQUIRE(fits.passed.size() == 1);
  REQUIRE(f.s->reserve(train0.uid, train0.ns, train0.name, fits.passed[0]).isOk());
  std::optional<ReclaimPlan> next = f.s->planReclaim();
  REQUIRE(next);
  CHECK(next->for_key == "default/train-1");
}

TEST_CASE("scheduler reclaim: the victims' nodes are kept for the waiting queue", "[reclaim][scheduler]") {
  Fleet f;
  PodFacts big = f.waiting("big", 8);
  std::optional<ReclaimPlan> plan = f.s->planReclaim();
  REQUIRE(plan);
  REQUIRE(plan->victims.size() == 2);  // both pods of one node
  const std::string node = plan->victims[0].node;
  CHECK(plan->victims[1].node == node);

  // One victim has gone: its GPUs are free, but not for batch.
  CHECK(f.s->release(plan->victims[0].uid));
  FilterResult other = f.s->filter(queuedPod("late", 4, "batch"), {node});
  CHECK(other.passed.empty());
  REQUIRE(other.failed.contains(node));
  CHECK(other.failed.at(node).find("is being freed for queue research") != std::string::npos);
  CHECK(other.categories["reclaim"] == 1);
  // A gang of batch that is not planned yet is held back the same way.
  PodFacts member = gpuPod("g-0", 4, {{kQueueKey, "batch"}, {kGangName, "g"}, {kGangSize, "1"}});
  FilterResult gang = f.s->filter(member, {node});
  CHECK(gang.passed.empty());
  REQUIRE(gang.failed.contains(node));
  CHECK(gang.failed.at(node).find("is being freed for queue research") != std::string::npos);
  FilterResult mine = f.s->filter(queuedPod("small", 4, "research"), {node});
  CHECK(mine.passed == std::vector<std::string>{node});

  // The last victim goes: the node is free, but still held until the pod it was freed for binds
  // (else another queue's pod could take it between the eviction and the bind).
  f.s->forgetPod(plan->victims[1].uid);
  CHECK(f.s->release(plan->victims[1].uid));
  auto held = [&] {
    FilterResult after = f.s->filter(queuedPod("late", 4, "batch"), {node});
    return after.failed.contains(node) && after.failed.at(node).find("being freed") != std::string::npos;
  };
  CHECK(held());
  CHECK_FALSE(f.s->planReclaim());  // still in flight
  // big binds: the next reclaim tick sees it bound, and the plan and the hold end.
  FilterResult fits = f.s->filter(big, {node});
  REQUIRE(fits.passed == std::vector<std::string>{node});
  REQUIRE(f.s->reserve(big.uid, big.ns, big.name, node).isOk());
  CHECK_FALSE(f.s->planReclaim());  // research holds its guarantee: nothing to plan
  CHECK_FALSE(held());
}

TEST_CASE("scheduler reclaim: one round for every waiting pod the guarantee covers", "[reclaim][scheduler]") {
  Fleet f;
  PodFacts a = f.waiting("train-0", 4);
  PodFacts b = f.waiting("train-1", 4);
  f.waiting("train-2", 4);  // beyond research's guarantee of 8: not reclaimed for
  std::optional<ReclaimPlan> plan = f.s->planReclaim();
  REQUIRE(plan);
  CHECK(plan->victims.size() == 2);
  CHECK(plan->freed_milli == 8000);
  REQUIRE(plan->served.size() == 2);
  CHECK(plan->served[0].key == "default/train-0");
  CHECK(plan->served[1].key == "default/train-1");
  CHECK(plan->reason.find("so that pod default/train-0 (4 GPUs) and 1 more pod or gang (4 GPUs) fit") !=
        std::string::npos);
  for (const ReclaimVictim& v : plan->victims) {
    CHECK(f.s->release(v.uid));
    f.s->forgetPod(v.uid);
  }
  // Victims gone, one of its pods bound: still in flight until the other binds too.
  for (const PodFacts* p : {&a, &b}) {
    FilterResult fits = f.s->filter(*p, {"n0", "n1"});
    REQUIRE_FALSE(fits.passed.empty());
    REQUIRE(f.s->reserve(p->uid, p->ns, p->name, fits.passed[0]).isOk());
    CHECK_FALSE(f.s->planReclaim());
  }
  // Ended: no node is held for research any more.
  FilterResult late = f.s->filter(queuedPod("late", 4, "batch"), {"n0", "n1"});
  CHECK(late.categories.count("reclaim") == 0);
}

TEST_CASE("scheduler reclaim: the deadline and a refused eviction end a plan", "[reclaim][scheduler]") {
  Fleet f;
  f.waiting("train-0", 4);
  std::optional<ReclaimPlan> plan = f.s->planReclaim();
  REQUIRE(plan);
  f.clock.advance(std::chrono::seconds(119));
  CHECK_FALSE(f.s->planReclaim());
  f.clock.advance(std::chrono::seconds(1));
  std::optional<ReclaimPlan> again = f.s->planReclaim();  // given up: planned afresh
  REQUIRE(again);
  CHECK(victimUids(*again) == victimUids(*plan));

  f.s->reclaimFinished(*again, false, "a PodDisruptionBudget refused the eviction");
  std::optional<ReclaimPlan> third = f.s->planReclaim();
  REQUIRE(third);
  CHECK(statusOf(f.s->queueStatuses(), "batch").evictions.empty());  // nothing was evicted
  // A refused plan's victims are spared for a reclaim timeout: each next plan takes others,
  // until every batch pod has been refused once.
  std::set<std::string> refused;
  for (const std::string& uid : victimUids(*again)) refused.insert(uid);
  std::optional<ReclaimPlan> next = third;
  for (int i = 0; next && i < 8; ++i) {
    for (const std::string& uid : victimUids(*next)) CHECK(refused.insert(uid).second);
    f.s->reclaimFinished(*next, false, "refused too");
    next = f.s->planReclaim();
  }
  CHECK_FALSE(next);
  CHECK(refused.size() == 4);
  f.clock.advance(std::chrono::minutes(2));
  CHECK(f.s->planReclaim());  // spared no longer
}

TEST_CASE("scheduler reclaim: evictions are counted per victim queue", "[reclaim][scheduler]") {
  Fleet f;
  f.waiting("big", 8);
  std::optional<ReclaimPlan> plan = f.s->planReclaim();
  REQUIRE(plan);
  f.s->reclaimFinished(*plan, true, "reclaim");
  const std::vector<QueueStatus> all = f.s->queueStatuses();  // statusOf refers into it
  const QueueStatus& batch = statusOf(all, "batch");
  REQUIRE(batch.evictions.contains("guarantee"));
  CHECK(batch.evictions.at("guarantee") == 2);
  CHECK_FALSE(f.s->planReclaim());  // still in flight until the victims are gone
}

TEST_CASE("scheduler reclaim: off without queues or with reclaim off", "[reclaim][scheduler]") {
  SECTION("reclaim off") {
    Fleet f(false);
    f.waiting("train-0", 4);
    CHECK_FALSE(f.s->planReclaim());
  }
  SECTION("no queues") {
    Fleet f(true, false);
    CHECK(f.s->filter(queuedPod("train-0", 4, "research"), {"n0", "n1"}).passed.empty());
    CHECK_FALSE(f.s->planReclaim());
  }
}

TEST_CASE("scheduler reclaim: not for a gang whose plan already holds its GPUs", "[reclaim][scheduler]") {
  Fleet f(true, true, 16000);
  REQUIRE(f.s->upsertNode(gpuNode("n2", 8)).isOk());
  auto member = [](int i) {
    PodFacts p =
        gpuPod("t-" + std::to_string(i), 4, {{kQueueKey, "research"}, {kGangName, "t"}, {kGangSize, "2"}});
    p.priority = 10;  // ahead of solo, were it waiting
    return p;
  };
  FilterResult first = f.s->filter(member(0), {"n0", "n1", "n2"});
  REQUIRE(first.passed == std::vector<std::string>{"n2"});  // planned: both slots on n2, held
  f.s->filter(member(1), {"n0", "n1", "n2"});
  f.waiting("solo", 8);
  // The gang's members are pending and no node has room, but their plan holds their GPUs: the
  // reclaim is for solo.
  std::optional<ReclaimPlan> plan = f.s->planReclaim();
  REQUIRE(plan);
  CHECK(plan->for_key == "default/solo");
}
