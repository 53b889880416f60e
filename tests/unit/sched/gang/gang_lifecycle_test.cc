// A gang's lifetime (docs/gang-lifecycle.md): it ends when its pods are gone, a name re-used
// afterwards is a new gang, deletions and late calls from kube-scheduler never leave holds, a
// pod's timeout is capped, and a plan made stale by the API's truth is given back.
#include <catch2/catch.hpp>
#include <map>

#include "adapters/yaml/config.h"
#include "support/fixtures.h"
#include "support/scheduler_fixture.h"
#include "troupe/sched/gang/gang.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::addGpuNodes;
using troupe::testing::FakeClock;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

SchedulerConfig lifecycleConfig(FakeClock& clock) {
  SchedulerConfig c;
  c.clock = [&clock] { return clock.t; };
  c.gang.timeout = std::chrono::seconds(30);
  c.gang.max_timeout = std::chrono::seconds(60);
  c.gang_starvation = std::chrono::seconds(120);
  return c;
}

PodFacts member(const std::string& gang, const std::string& name, int gpus, int size,
                const std::string& timeout = "") {
  StringMap a{{kGangName, gang}, {kGangSize, std::to_string(size)}};
  if (!timeout.empty()) a[kGangTimeout] = timeout;
  return gpuPod(name, gpus, a);
}

// Filters and binds every pod; returns how many binds succeeded.
int filterAndBind(Scheduler& s, const std::vector<PodFacts>& pods, const std::vector<std::string>& names) {
  std::vector<std::pair<const PodFacts*, std::string>> passed;
  for (const PodFacts& p : pods) {
    FilterResult r = s.filter(p, names);
    if (!r.passed.empty()) passed.emplace_back(&p, r.passed[0]);
  }
  int ok = 0;
  for (const auto& [p, node] : passed) {
    s.bind(p->uid, p->ns, p->name, node, [&ok](Result<model::Allocation> r) { ok += r.isOk() ? 1 : 0; });
  }
  return ok;
}

std::vector<PodFacts> gang(const std::string& name, const std::string& prefix, int n, int gpus) {
  std::vector<PodFacts> out;
  for (int i = 0; i < n; ++i) out.push_back(member(name, prefix + std::to_string(i), gpus, n));
  return out;
}

void deleteAll(Scheduler& s, const std::vector<PodFacts>& pods) {
  for (const PodFacts& p : pods) {
    s.release(p.uid);
    s.forgetPod(p.uid);
  }
}

const Scheduler::GangView* view(const std::vector<Scheduler::GangView>& views, const std::string& key) {
  for (const auto& v : views) {
    if (v.key == key) return &v;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("gang lifecycle: two competing gangs re-submitted under the same names, three times",
          "[gang][lifecycle]") {
  // The reproduction at unit scale: 5 nodes x 8 GPUs, gangs of 12 x 2 GPUs (60% each).
  FakeClock clock;
  Scheduler s(lifecycleConfig(clock));
  const auto names = addGpuNodes(s, 5);
  uint64_t last_incarnation = 0;
  for (int round = 0; round < 3; ++round) {
    const std::string r = "r" + std::to_string(round) + "-";
    const auto ga = gang("ga", r + "a", 12, 2);
    const auto gb = gang("gb", r + "b", 12, 2);
    REQUIRE(filterAndBind(s, ga, names) == 12);
    CHECK(filterAndBind(s, gb, names) == 0);  // all or nothing: not one member of gb
    const auto views = s.gangs();
    REQUIRE(view(views, "default/ga"));
    CHECK(view(views, "default/ga")->incarnation > last_incarnation);
    last_incarnation = view(views, "default/gb")->incarnation;
    deleteAll(s, ga);
    CHECK(filterAndBind(s, gb, names) == 12);
    deleteAll(s, gb);
    CHECK(s.gangs().empty());
    const ClusterSummary sum = s.summary();
    CHECK(sum.gangs.held_gpus == 0);
    CHECK(sum.gangs.waiting + sum.gangs.planned + sum.gangs.admitted == 0);
    CHECK(sum.gangs.draining_nodes == 0);
  }
}

TEST_CASE("gang lifecycle: deleting members parked at the barrier fails their binds and frees all",
          "[gang][lifecycle]") {
  FakeClock clock;
  Scheduler s(lifecycleConfig(clock));
  const auto names = addGpuNodes(s, 4);
  const auto g = gang("g", "g", 4, 8);
  std::vector<std::string> slot;
  for (int i = 0; i < 3; ++i) slot.push_back(s.filter(g[static_cast<size_t>(i)], names).passed.at(0));
  int failed = 0;
  for (int i = 0; i < 3; ++i) {
    const PodFacts& p = g[static_cast<size_t>(i)];
    s.bind(p.uid, p.ns, p.name, slot[static_cast<size_t>(i)],
           [&failed](Result<model::Allocation> r) { failed += r.isOk() ? 0 : 1; });
  }
  CHECK(failed == 0);  // parked
  CHECK(s.summary().gangs.held_gpus == 32);
  s.forgetPod(g[0].uid);
  CHECK(failed == 1);                        // at once, not at the timeout
  CHECK(s.summary().gangs.held_gpus == 32);  // the others still wait; the slot is free again
  s.forgetPod(g[1].uid);
  s.forgetPod(g[2].uid);
  CHECK(failed == 3);
  CHECK(s.gangs().empty());
  CHECK(s.summary().gangs.held_gpus == 0);
  // The next gang gets every GPU.
  CHECK(filterAndBind(s, gang("next", "next", 4, 8), names) == 4);
}

TEST_CASE("gang lifecycle: kube-scheduler's late filter and bind of a deleted pod change nothing",
          "[gang][lifecycle]") {
  FakeClock clock;
  Scheduler s(lifecycleConfig(clock));
  const auto names = addGpuNodes(s, 2);
  const PodFacts p = member("g", "g0", 8, 2);
  const std::string node = s.filter(p, names).passed.at(0);
  s.forgetPod(p.uid);
  CHECK(s.gangs().empty());
  FilterResult late = s.filter(p, names);
  CHECK(late.passed.empty());
  REQUIRE(late.unresolvable.contains(names[0]));
  CHECK_THAT(late.unresolvable.at(names[0]), Catch::Contains("was deleted"));
  CHECK(s.gangs().empty());  // no ghost member, no plan
  std::optional<Result<model::Allocation>> bound;
  s.bind(p.uid, p.ns, p.name, node, [&bound](Result<model::Allocation> r) { bound = std::move(r); });
  REQUIRE(bound);
  CHECK_FALSE(bound->isOk());
  CHECK(s.summary().gangs.held_gpus == 0);
}

TEST_CASE("gang lifecycle: half of a bound gang deleted; its replacements are planned together",
          "[gang][lifecycle]") {
  FakeClock clock;
  Scheduler s(lifecycleConfig(clock));
  const auto names = addGpuNodes(s, 4);
  const auto g = gang("g", "g", 4, 8);
  REQUIRE(filterAndBind(s, g, names) == 4);
  s.release(g[0].uid);
  s.forgetPod(g[0].uid);
  s.release(g[1].uid);
  s.forgetPod(g[1].uid);
  auto v = s.gangs();
  REQUIRE(v.size() == 1);
  CHECK(v[0].bound == 2);
  CHECK(v[0].state == Scheduler::GangView::State::kWaiting);
  CHECK(s.summary().gangs.held_gpus == 0);
  CHECK(s.summary().gangs.waiting == 0);  // nothing pending: it waits for nobody
  // One replacement alone is not bound: the gang needs two more.
  const PodFacts r0 = member("g", "r0", 8, 4), r1 = member("g", "r1", 8, 4);
  const std::string n0 = s.filter(r0, names).passed.at(0);
  CHECK(s.summary().gangs.held_gpus == 16);  // both missing members planned together
  int ok = 0;
  s.bind(r0.uid, r0.ns, r0.name, n0, [&ok](Result<model::Allocation> r) { ok += r.isOk() ? 1 : 0; });
  CHECK(ok == 0);
  const std::string n1 = s.filter(r1, names).passed.at(0);
  s.bind(r1.uid, r1.ns, r1.name, n1, [&ok](Result<model::Allocation> r) { ok += r.isOk() ? 1 : 0; });
  CHECK(ok == 2);
  CHECK(s.gangs()[0].state == Scheduler::GangView::State::kAdmitted);
}

TEST_CASE("gang lifecycle: a bound member lost while the rest is planned re-plans for the minimum",
          "[gang][lifecycle]") {
  FakeClock clock;
  Scheduler s(lifecycleConfig(clock));
  const auto names = addGpuNodes(s, 3);
  const auto g = gang("g", "g", 2, 8);
  REQUIRE(filterAndBind(s, g, names) == 2);
  deleteAll(s, {g[0]});
  const PodFacts r = member("g", "r", 8, 2);
  const std::string node = s.filter(r, names).passed.at(0);  // planned: 1 missing
  deleteAll(s, {g[1]});                                      // now 2 are missing
  std::optional<Result<model::Allocation>> bound;
  s.bind(r.uid, r.ns, r.name, node, [&bound](Result<model::Allocation> x) { bound = std::move(x); });
  REQUIRE(bound);
  CHECK_FALSE(bound->isOk());  // one member alone is not the gang
  CHECK(s.summary().gangs.held_gpus == 0);
}

TEST_CASE("gang lifecycle: a pod's gang-timeout is capped at the configured maximum", "[gang][lifecycle]") {
  FakeClock clock;
  Scheduler s(lifecycleConfig(clock));
  const auto names = addGpuNodes(s, 8);
  // One filter of a made-up 7-member gang asking to be held for ten years.
  REQUIRE(s.filter(member("hog", "hog0", 8, 7, "87600h"), names).passed.size() == 1);
  CHECK(s.summary().gangs.held_gpus == 56);
  clock.t += std::chrono::seconds(61);  // past the 60 s maximum (and the active window)
  s.tick();
  CHECK(s.summary().gangs.held_gpus == 0);
}

TEST_CASE("gang lifecycle: the number of gangs is bounded", "[gang][lifecycle]") {
  FakeClock clock;
  SchedulerConfig c = lifecycleConfig(clock);
  c.gang.max_gangs = 3;
  Scheduler s(c);
  const auto names = addGpuNodes(s, 1);
  for (int i = 0; i < 3; ++i) s.filter(member("g" + std::to_string(i), "p" + std::to_string(i), 8, 9), names);
  FilterResult r = s.filter(member("g3", "p3", 8, 2), names);
  CHECK(r.passed.empty());
  REQUIRE(r.failed.contains("n0"));
  CHECK_THAT(r.failed.at("n0"), Catch::Contains("configured maximum"));
  CHECK(s.gangs().size() == 3);
}

TEST_CASE("gang lifecycle: drains end with the gang, and nodes kept free are not 'never fits'",
          "[gang][lifecycle]") {
  FakeClock clock;
  Scheduler s(lifecycleConfig(clock));
  const auto names = addGpuNodes(s, 4);
  // Busy nodes: 4 GPUs taken on each.
  for (int i = 0; i < 4; ++i) {
    const PodFacts p = gpuPod("busy" + std::to_string(i), 4);
    REQUIRE(s.filter(p, {names[static_cast<size_t>(i)]}).passed.size() == 1);
    REQUIRE(s.reserve(p.uid, p.ns, p.name, names[static_cast<size_t>(i)]).isOk());
  }
  // A gang of 3 whole nodes waits past the starvation threshold and drains 3 nodes.
  const PodFacts big = member("big", "big0", 8, 3);
  CHECK(s.filter(big, names).passed.empty());
  clock.t += std::chrono::seconds(121);
  CHECK(s.filter(big, names).passed.empty());
  CHECK(s.summary().gangs.draining_nodes == 3);
  // Another gang that fits only on all four nodes when empty is told to wait, not "never".
  FilterResult other = s.filter(member("other", "o0", 8, 4), names);
  REQUIRE(other.failed.contains(names[0]));
  CHECK_FALSE(other.unresolvable.contains(names[0]));
  // The starving gang's pod is deleted: its drains go at once.
  s.forgetPod(big.uid);
  CHECK(s.summary().gangs.draining_nodes == 0);
  // A drain also lapses when nobody filters the gang any more.
  const PodFacts big2 = member("big2", "big2-0", 8, 3);
  s.filter(big2, names);
  clock.t += std::chrono::seconds(121);
  s.filter(big2, names);
  REQUIRE(s.summary().gangs.draining_nodes == 3);
  clock.t += std::chrono::seconds(61);
  s.tick();
  CHECK(s.summary().gangs.draining_nodes == 0);
}

TEST_CASE("gang lifecycle: a member the API shows bound by someone else releases this Troupe's plan",
          "[gang][lifecycle]") {
  // An old leader's Troupe parked a gang; the new leader bound it. Its watch shows the members
  // bound: the stale plan and the parked binds go.
  FakeClock clock;
  Scheduler s(lifecycleConfig(clock));
  const auto names = addGpuNodes(s, 2);
  const auto g = gang("g", "g", 2, 8);
  const std::string node = s.filter(g[0], names).passed.at(0);
  int failed = 0;
  s.bind(g[0].uid, g[0].ns, g[0].name, node,
         [&failed](Result<model::Allocation> r) { failed += r.isOk() ? 0 : 1; });
  REQUIRE(s.summary().gangs.held_gpus == 16);
  for (int i = 0; i < 2; ++i) {
    model::Allocation a;
    a.pod_uid = g[static_cast<size_t>(i)].uid;
    a.pod_key = g[static_cast<size_t>(i)].key();
    a.node = names[static_cast<size_t>(1 - i)];
    a.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
    a.gang = "default/g";
    REQUIRE(s.recordAllocation(a).isOk());
  }
  CHECK(failed == 1);
  CHECK(s.summary().gangs.held_gpus == 0);
  REQUIRE(s.gangs().size() == 1);
  CHECK(s.gangs()[0].bound == 2);
}

TEST_CASE("gang lifecycle: config keys gang.timeout, gang.maxTimeout, gang.maxGangs", "[gang][config]") {
  auto c =
      troupe::config::parseServeConfig("gang:\n  timeout: 2m\n  maxTimeout: 10m\n  maxGangs: 50\n", "t.yaml");
  REQUIRE(c.isOk());
  CHECK(c.value().gang.timeout == std::chrono::minutes(2));
  CHECK(c.value().gang.max_timeout == std::chrono::minutes(10));
  CHECK(c.value().gang.max_gangs == 50);
  c = troupe::config::parseServeConfig("gang:\n  timeout: 10m\n  maxTimeout: 5m\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::Contains("must not exceed gang.maxTimeout"));
  c = troupe::config::parseServeConfig("gang:\n  maxTimeout: soon\n", "t.yaml");
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::StartsWith("t.yaml:2: gang.maxTimeout"));
}

TEST_CASE(
    "gang lifecycle: members that get no prioritize call (kube-scheduler 1.37 batching) bind on the plan",
    "[gang][lifecycle]") {
  // Since 1.37 kube-scheduler may skip score (and so the extender's prioritize) for members of a
  // PodGroup cycle. Troupe's plan must not depend on it: filter passes each member only its
  // planned node, so whatever kube-scheduler would have scored, it binds there.
  FakeClock clock;
  Scheduler s(lifecycleConfig(clock));
  const std::vector<std::string> names = addGpuNodes(s, 4);
  const std::vector<PodFacts> pods = gang("g", "m", 4, 4);
  std::map<std::string, int> per_node;
  for (const PodFacts& p : pods) {
    const FilterResult r = s.filter(p, names);
    REQUIRE(r.passed.size() == 1);  // the planned slot, nothing to score
    ++per_node[r.passed[0]];
  }
  // 4 x 4 GPUs packed onto two whole 8-GPU nodes, as the plan put them.
  CHECK(per_node.size() == 2);
  for (const auto& [node, n] : per_node) CHECK(n == 2);
  CHECK(filterAndBind(s, pods, names) == 4);
  int free_gpus = 0;
  for (const auto& row : s.summary().by_product) free_gpus += row.whole_free;
  CHECK(free_gpus == 16);
}
