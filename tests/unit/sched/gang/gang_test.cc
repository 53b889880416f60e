// Gangs: membership parsing, whole-gang planning, holds, the bind barrier, timeouts, turns
// between gangs and the starvation guard.
#include "troupe/sched/gang/gang.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <set>
#include <thread>

#include "adapters/http/extender_scores.h"
#include "support/fixtures.h"
#include "support/scheduler_fixture.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::http::HostScore;
using troupe::testing::addGpuNodes;
using troupe::testing::FakeClock;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

SchedulerConfig gangConfig(FakeClock& clock) {
  SchedulerConfig c;
  c.clock = [&clock] { return clock.t; };
  c.gang.timeout = std::chrono::seconds(30);
  c.gang_starvation = std::chrono::seconds(120);
  return c;
}

PodFacts member(const std::string& gang, int index, int gpus, int size, int64_t priority = 0) {
  PodFacts p = gpuPod(gang + "-" + std::to_string(index), gpus,
                      {{kGangName, gang}, {kGangSize, std::to_string(size)}});
  p.priority = priority;
  return p;
}

std::vector<std::string> nodeNames(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("n" + std::to_string(i));
  return out;
}

struct BindProbe {
  std::atomic<int> calls{0};
  std::optional<Result<model::Allocation>> result;
  BindCallback callback() {
    return [this](Result<model::Allocation> r) {
      result = std::move(r);
      ++calls;
    };
  }
};

int freeGpus(Scheduler& s) {
  int free = 0;
  for (const auto& row : s.summary().by_product) free += row.whole_free;
  return free;
}

}  // namespace

TEST_CASE("gang: membership keys, precedence and errors", "[gang]") {
  const auto def = std::chrono::milliseconds(300000);
  SECTION("troupe keys") {
    PodFacts p = gpuPod("a", 1, {{kGangName, "train"}, {kGangSize, "4"}, {kGangTimeout, "90s"}});
    auto g = parseGang(p, def);
    REQUIRE(g.isOk());
    REQUIRE(g.value());
    CHECK(g.value()->key == "default/train");
    CHECK(g.value()->min_member == 4);
    CHECK(g.value()->timeout == std::chrono::seconds(90));
  }
  SECTION("scheduler-plugins label with the PodGroup's minMember") {
    PodFacts p = gpuPod("a", 1);
    p.labels[kPodGroupLabel] = "pg";
    auto g = parseGang(p, def, PodGroupInfo{6, ""});
    REQUIRE(g.isOk());
    CHECK(g.value()->min_member == 6);
    CHECK(g.value()->source == kPodGroupLabel);
    CHECK(g.value()->timeout == def);
    // The PodGroup object wins over troupe.dev/gang-size; without it, gang-size is used.
    p.annotations[kGangSize] = "3";
    CHECK(parseGang(p, def, PodGroupInfo{6, ""}).value()->min_member == 6);
    CHECK(parseGang(p, def, PodGroupInfo{std::nullopt, "the PodGroup CRD is not installed"})
              .value()
              ->min_member == 3);
    CHECK(gangKeyOf(p) == "default/pg");
    REQUIRE(podGroupName(p));
    CHECK(*podGroupName(p) == "pg");
  }
  SECTION("scheduler-plugins label with neither a PodGroup nor a size: the reason says both") {
    PodFacts p = gpuPod("a", 1);
    p.labels[kPodGroupLabel] = "pg";
    auto e = parseGang(p, def, PodGroupInfo{std::nullopt, "the PodGroup CRD is not installed"});
    REQUIRE_FALSE(e.isOk());
    CHECK_THAT(e.status().message(), Catch::Contains("the PodGroup CRD is not installed"));
    CHECK_THAT(e.status().message(), Catch::Contains("spec.minMember"));
    CHECK_THAT(e.status().message(), Catch::Contains("troupe.dev/gang-size"));
  }
  SECTION("a troupe.dev/gang pod's PodGroup size is used only without gang-size") {
    PodFacts p = gpuPod("a", 1, {{kGangName, "g"}, {kGangSize, "2"}});
    p.labels[kPodGroupLabel] = "pg";
    CHECK(parseGang(p, def, PodGroupInfo{6, ""}).value()->min_member == 2);
    CHECK(gangKeyOf(p) == "default/g");
    CHECK(gangKeyOf(gpuPod("b", 1)).empty());
  }
  SECTION("Volcano and Kueue") {
    PodFacts v = gpuPod("a", 1, {{kVolcanoGroup, "vg"}, {kGangSize, "3"}});
    CHECK(parseGang(v, def).value()->key == "default/vg");
    PodFacts k = gpuPod("b", 1, {{kKueueTotal, "5"}});
    k.labels[kKueueGroup] = "kg";
    CHECK(parseGang(k, def).value()->min_member == 5);
  }
  SECTION("troupe.dev/gang wins over the others") {
    PodFacts p = gpuPod("a", 1, {{kGangName, "mine"}, {kGangSize, "2"}, {kVolcanoGroup, "theirs"}});
    CHECK(parseGang(p, def).value()->key == "default/mine");
  }
  SECTION("no gang") { CHECK_FALSE(parseGang(gpuPod("a", 1), def).value()); }
  SECTION("errors name the key and the fix") {
    PodFacts no_size = gpuPod("a", 1, {{kVolcanoGroup, "vg"}});
    auto e = parseGang(no_size, def);
    REQUIRE_FALSE(e.isOk());
    CHECK_THAT(e.status().message(), Catch::Contains("troupe.dev/gang-size"));
    auto bad = parseGang(gpuPod("a", 1, {{kGangName, "g"}, {kGangSize, "many"}}), def);
    REQUIRE_FALSE(bad.isOk());
    CHECK_THAT(bad.status().message(), Catch::Contains("\"many\""));
    auto t = parseGang(gpuPod("a", 1, {{kGangName, "g"}, {kGangSize, "2"}, {kGangTimeout, "soon"}}), def);
    REQUIRE_FALSE(t.isOk());
    CHECK_THAT(t.status().message(), Catch::Contains("troupe.dev/gang-timeout"));
  }
  CHECK(parseDuration("1h30m").value() == std::chrono::minutes(90));
  CHECK(parseDuration("250ms").value() == std::chrono::milliseconds(250));
  CHECK_FALSE(parseDuration("5 parsecs").isOk());
}

TEST_CASE("gang: planned whole on the fewest nodes, GPUs held, members steered", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 4);
  const auto names = nodeNames(4);
  // 4 members x 4 GPUs fit on two 8-GPU nodes.
  FilterResult first = s.filter(member("g", 0, 4, 4), names);
  REQUIRE(first.passed.size() == 1);
  CHECK(freeGpus(s) == 32 - 16);  // the whole gang is held at the first member's filter
  CHECK(s.summary().gangs.planned == 1);
  CHECK(s.summary().gangs.held_gpus == 16);

  std::set<std::string> used_nodes;
  for (int i = 0; i < 4; ++i) {
    FilterResult r = s.filter(member("g", i, 4, 4), names);
    REQUIRE(r.passed.size() == 1);
    used_nodes.insert(r.passed[0]);
    // The other nodes are left out of the answer (kube-scheduler pays for every node listed).
    CHECK(r.unresolvable.empty());
    CHECK(r.failed.empty());
    auto scores = troupe::http::extenderScores(s.prioritize(member("g", i, 4, 4), names));
    for (const HostScore& h : scores) CHECK(h.score == (h.host == r.passed[0] ? 10 : 0));
  }
  CHECK(used_nodes.size() == 2);
  // A pod on its own cannot take the held GPUs: only two nodes remain for an 8-GPU pod.
  FilterResult single = s.filter(gpuPod("solo", 8), names);
  CHECK(single.passed.size() == 2);
}

TEST_CASE("gang: the bind barrier releases all members together", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 2);
  const auto names = nodeNames(2);
  std::vector<std::string> planned(3);
  for (int i = 0; i < 3; ++i) planned[i] = s.filter(member("g", i, 4, 3), names).passed.at(0);
  BindProbe probes[3];
  for (int i = 0; i < 2; ++i) {
    s.bind("uid-g-" + std::to_string(i), "default", "g-" + std::to_string(i), planned[i],
           probes[i].callback());
    CHECK(probes[i].calls == 0);  // waits for the others
  }
  CHECK_FALSE(s.allocationOf("uid-g-0"));
  s.bind("uid-g-2", "default", "g-2", planned[2], probes[2].callback());
  std::set<int> gpus_on_first;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(probes[i].calls == 1);
    REQUIRE(probes[i].result->isOk());
    const model::Allocation& a = probes[i].result->value();
    CHECK(a.node == planned[i]);
    CHECK(a.gpus.size() == 4);
    CHECK(a.gang == "default/g");
    REQUIRE(s.allocationOf(a.pod_uid));
  }
  CHECK(s.summary().gangs.admitted == 1);
  CHECK(s.summary().gangs.held_gpus == 0);
  CHECK(freeGpus(s) == 16 - 12);
  auto events = s.drainGangEvents();
  CHECK(events.admit_seconds.size() == 1);
  // A retried bind of a released member is answered with the same GPUs.
  BindProbe again;
  s.bind("uid-g-1", "default", "g-1", planned[1], again.callback());
  REQUIRE(again.result->isOk());
  CHECK(again.result->value().gpus == probes[1].result->value().gpus);
}

TEST_CASE("gang: all-or-nothing admission with the missing GPUs named", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 2);
  const auto names = nodeNames(2);
  FilterResult busy = s.filter(member("big", 0, 8, 3), names);  // 24 GPUs on 16
  CHECK(busy.passed.empty());
  CHECK(busy.failed.empty());
  REQUIRE(busy.unresolvable.size() == 2);  // can never fit: bigger than the matching nodes
  CHECK_THAT(busy.unresolvable.begin()->second, Catch::Contains("even when empty"));

  REQUIRE(s.filter(gpuPod("solo", 8), names).passed.size() == 2);
  REQUIRE(s.reserve("uid-solo", "default", "solo", "n0").isOk());
  FilterResult wait = s.filter(member("two", 0, 8, 2), names);  // fits when empty, not now
  CHECK(wait.passed.empty());
  REQUIRE(wait.failed.size() == 2);
  CHECK_THAT(wait.failed.begin()->second, Catch::Contains("8 more GPUs"));
  CHECK(freeGpus(s) == 8);  // nothing held for a gang that does not fit
  s.release("uid-solo");
  CHECK(s.filter(member("two", 0, 8, 2), names).passed.size() == 1);
}

TEST_CASE("gang: two gangs wanting 60% each never split the cluster", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 5);  // 40 GPUs; each gang wants 3 x 8 = 24
  const auto names = nodeNames(5);
  REQUIRE(s.filter(member("a", 0, 8, 3), names).passed.size() == 1);
  FilterResult b = s.filter(member("b", 0, 8, 3), names);
  CHECK(b.passed.empty());
  CHECK(s.summary().gangs.planned == 1);
  CHECK(s.summary().gangs.waiting == 1);
  // Gang a binds whole; b holds nothing.
  std::vector<std::string> nodes_a;
  BindProbe probes[3];
  for (int i = 0; i < 3; ++i) nodes_a.push_back(s.filter(member("a", i, 8, 3), names).passed.at(0));
  for (int i = 0; i < 3; ++i) {
    s.bind("uid-a-" + std::to_string(i), "default", "a-" + std::to_string(i), nodes_a[i],
           probes[i].callback());
  }
  for (auto& p : probes) REQUIRE(p.result->isOk());
  CHECK(s.filter(member("b", 0, 8, 3), names).passed.empty());
  // Gang a finishes (its pods succeed: their GPUs go back and they are gone): b is planned whole.
  for (int i = 0; i < 3; ++i) {
    s.release("uid-a-" + std::to_string(i));
    s.forgetPod("uid-a-" + std::to_string(i));
  }
  CHECK(s.filter(member("b", 0, 8, 3), names).passed.size() == 1);
  CHECK(freeGpus(s) == 16);
}

TEST_CASE("gang: a barrier timeout fails every waiting member and frees the GPUs", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 2);
  const auto names = nodeNames(2);
  std::vector<std::string> planned;
  for (int i = 0; i < 4; ++i) planned.push_back(s.filter(member("g", i, 2, 4), names).passed.at(0));
  BindProbe probes[3];
  for (int i = 0; i < 3; ++i) {
    s.bind("uid-g-" + std::to_string(i), "default", "g-" + std::to_string(i), planned[i],
           probes[i].callback());
  }
  clock.advance(std::chrono::seconds(29));
  s.tick();
  for (auto& p : probes) CHECK(p.calls == 0);
  clock.advance(std::chrono::seconds(2));
  s.tick();
  for (auto& p : probes) {
    REQUIRE(p.calls == 1);
    REQUIRE_FALSE(p.result->isOk());
    CHECK(p.result->status().code() == Code::kDeadlineExceeded);
    CHECK_THAT(p.result->status().message(), Catch::Contains("3 of 4"));
  }
  CHECK(freeGpus(s) == 16);
  CHECK(s.drainGangEvents().timeouts == 1);
  CHECK_FALSE(s.allocationOf("uid-g-0"));
  // Planned afresh at the next filter.
  CHECK(s.filter(member("g", 0, 2, 4), names).passed.size() == 1);
}

TEST_CASE("gang: waiting gangs take turns by priority, then arrival", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 2);
  const auto names = nodeNames(2);
  REQUIRE(s.filter(gpuPod("solo", 8), names).passed.size() == 2);
  REQUIRE(s.reserve("uid-solo", "default", "solo", "n0").isOk());
  // Both gangs want 16 GPUs; only 8 are free. The high-priority one arrives second.
  CHECK(s.filter(member("low", 0, 8, 2, 0), names).passed.empty());
  CHECK(s.filter(member("high", 0, 8, 2, 100), names).passed.empty());
  s.release("uid-solo");
  // The low-priority gang would fit now, but the high-priority one is ahead and fits too.
  FilterResult low = s.filter(member("low", 0, 8, 2, 0), names);
  CHECK(low.passed.empty());
  CHECK_THAT(low.failed.begin()->second, Catch::Contains("behind gang default/high"));
  CHECK(s.filter(member("high", 0, 8, 2, 100), names).passed.size() == 1);
}

TEST_CASE("gang: a starving gang keeps its nodes free of new small pods", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 2);
  const auto names = nodeNames(2);
  // One GPU busy on each node: a 2 x 8 gang cannot start, small pods could keep it out forever.
  for (int i = 0; i < 2; ++i) {
    PodFacts p = gpuPod("small" + std::to_string(i), 1);
    REQUIRE(s.filter(p, {names[static_cast<size_t>(i)]}).passed.size() == 1);
    REQUIRE(s.reserve(p.uid, "default", p.name, names[static_cast<size_t>(i)]).isOk());
  }
  CHECK(s.filter(member("big", 0, 8, 2), names).passed.empty());
  CHECK(s.filter(gpuPod("more", 1), names).passed.size() == 2);  // not starving yet
  clock.advance(std::chrono::seconds(121));
  CHECK(s.filter(member("big", 0, 8, 2), names).passed.empty());
  CHECK(s.summary().gangs.draining_nodes == 2);
  FilterResult more = s.filter(gpuPod("more", 1), names);
  CHECK(more.passed.empty());
  CHECK_THAT(more.failed.begin()->second, Catch::Contains("kept free for gang default/big"));
  s.release("uid-small0");
  s.release("uid-small1");
  CHECK(s.filter(member("big", 0, 8, 2), names).passed.size() == 1);
  CHECK(s.summary().gangs.draining_nodes == 0);
}

TEST_CASE("gang: changes while waiting never leave a stuck reservation", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 3);
  const auto names = nodeNames(3);
  std::string node = s.filter(member("g", 0, 8, 2), names).passed.at(0);
  CHECK(freeGpus(s) == 8);
  SECTION("a planned node disappears") {
    REQUIRE(s.removeNode(node));
    CHECK(s.summary().gangs.held_gpus == 0);
    CHECK(s.filter(member("g", 0, 8, 2), nodeNames(3)).passed.size() == 1);
  }
  SECTION("the size annotation changes") {
    FilterResult r = s.filter(member("g", 0, 8, 3), names);
    CHECK(r.passed.size() == 1);
    CHECK(s.summary().gangs.held_gpus == 24);
  }
  SECTION("nobody claims the plan") {
    clock.advance(std::chrono::seconds(61));
    s.tick();
    CHECK(s.summary().gangs.held_gpus == 0);
    CHECK(freeGpus(s) == 24);
  }
  SECTION("a member is deleted: its slot goes to the next member") {
    s.forgetPod("uid-g-0");
    FilterResult r = s.filter(member("g", 5, 8, 2), names);
    CHECK(r.passed == std::vector<std::string>{node});
  }
}

TEST_CASE("gang: concurrent binds of many members", "[gang][concurrency]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 8);
  const auto names = nodeNames(8);
  const int members = 16;  // 16 x 4 GPUs = the whole cluster
  std::vector<std::string> planned;
  for (int i = 0; i < members; ++i)
    planned.push_back(s.filter(member("g", i, 4, members), names).passed.at(0));
  std::vector<BindProbe> probes(members);
  std::vector<std::thread> threads;
  for (int i = 0; i < members; ++i) {
    threads.emplace_back([&, i] {
      s.bind("uid-g-" + std::to_string(i), "default", "g-" + std::to_string(i),
             planned[static_cast<size_t>(i)], probes[static_cast<size_t>(i)].callback());
    });
  }
  for (auto& t : threads) t.join();
  std::map<std::string, std::set<int>> taken;
  for (auto& p : probes) {
    REQUIRE(p.calls == 1);
    REQUIRE(p.result->isOk());
    for (int g : p.result->value().gpus) CHECK(taken[p.result->value().node].insert(g).second);
  }
  CHECK(freeGpus(s) == 0);
}

TEST_CASE("gang: members get notices when planned, waiting at the barrier and timed out", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  std::vector<GangNotice> seen;
  std::mutex seen_mu;
  s.setGangObserver([&](const GangNotice& n) {
    std::lock_guard lock(seen_mu);
    seen.push_back(n);
  });
  addGpuNodes(s, 2);
  const auto names = nodeNames(2);
  std::vector<std::string> planned;
  for (int i = 0; i < 3; ++i) planned.push_back(s.filter(member("g", i, 4, 3), names).passed.at(0));
  REQUIRE(seen.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(seen[i].kind == GangNotice::Kind::kPlanned);
    CHECK(seen[i].pod_uid == "uid-g-" + std::to_string(i));
    CHECK(seen[i].pod_ns == "default");
    CHECK(seen[i].pod_name == "g-" + std::to_string(i));
    CHECK(seen[i].gang == "default/g");
    CHECK_THAT(seen[i].message, Catch::Contains("3 members on 2 nodes"));
    CHECK_THAT(seen[i].message, Catch::Contains("this pod goes to node " + planned[i]));
  }
  // Filtering a planned member again says nothing new.
  s.filter(member("g", 0, 4, 3), names);
  CHECK(seen.size() == 3);

  BindProbe probes[2];
  s.bind("uid-g-0", "default", "g-0", planned[0], probes[0].callback());
  s.bind("uid-g-1", "default", "g-1", planned[1], probes[1].callback());
  REQUIRE(seen.size() == 5);
  CHECK(seen[3].kind == GangNotice::Kind::kWaiting);
  CHECK_THAT(seen[3].message, Catch::Contains("for 2 more of 3 members"));
  CHECK(seen[4].pod_name == "g-1");
  CHECK_THAT(seen[4].message, Catch::Contains("for 1 more of 3 members"));

  clock.advance(std::chrono::seconds(31));
  s.tick();
  REQUIRE(seen.size() == 7);
  for (int i = 5; i < 7; ++i) {
    CHECK(seen[i].kind == GangNotice::Kind::kTimedOut);
    CHECK_THAT(seen[i].message, Catch::Contains("only 2 of 3 members reached bind"));
  }
  REQUIRE(probes[0].result);
  CHECK_FALSE(probes[0].result->isOk());
  // Without an observer nothing is kept for later.
  s.setGangObserver(nullptr);
  s.filter(member("g", 0, 4, 3), names);
  CHECK(seen.size() == 7);
}

TEST_CASE("gang: members bound before a restart count; only the rest are planned and held", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 4);
  const auto names = nodeNames(4);
  // What the API shows a fresh Troupe: two of four members bound (recorded by the cluster sync).
  for (int i = 0; i < 2; ++i) {
    model::Allocation a;
    a.pod_uid = "uid-g-" + std::to_string(i);
    a.pod_key = "default/g-" + std::to_string(i);
    a.node = "n0";
    a.gpus = i == 0 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4, 5, 6, 7};
    a.gang = "default/g";
    REQUIRE(s.recordAllocation(a).isOk());
  }
  const std::string node2 = s.filter(member("g", 2, 4, 4), names).passed.at(0);
  CHECK(s.summary().gangs.held_gpus == 8);  // two slots, not four
  const std::string node3 = s.filter(member("g", 3, 4, 4), names).passed.at(0);
  BindProbe p2, p3;
  s.bind("uid-g-2", "default", "g-2", node2, p2.callback());
  CHECK(p2.calls == 0);
  s.bind("uid-g-3", "default", "g-3", node3, p3.callback());
  REQUIRE(p2.result->isOk());
  REQUIRE(p3.result->isOk());
  CHECK(s.summary().gangs.admitted == 1);
  CHECK(s.summary().gangs.held_gpus == 0);
}

TEST_CASE("gang: a PodGroup label takes the minimum from the lookup hook", "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 2);
  const auto names = nodeNames(2);
  int lookups = 0;
  // The adapter reads the PodGroup before filter (ExtenderHandler::setPodGroups).
  const PodGroupLookup lookup = [&](const std::string& ns, const std::string& name) {
    ++lookups;
    CHECK(ns == "default");
    return name == "pg" ? PodGroupInfo{3, ""}
                        : PodGroupInfo{std::nullopt, "PodGroup default/" + name + " does not exist"};
  };
  auto filter = [&](const PodFacts& pod) { return s.filter(pod, names, podGroupFor(pod, lookup)); };
  PodFacts p = gpuPod("m0", 4);
  p.labels[kPodGroupLabel] = "pg";
  REQUIRE(filter(p).passed.size() == 1);
  CHECK(s.summary().gangs.held_gpus == 12);  // 3 members of 4 GPUs
  PodFacts other = gpuPod("x0", 4);
  other.labels[kPodGroupLabel] = "missing";
  FilterResult r = filter(other);
  REQUIRE(r.unresolvable.size() == 2);
  CHECK_THAT(r.unresolvable.begin()->second, Catch::Contains("PodGroup default/missing does not exist"));
  CHECK(lookups == 2);
  CHECK(filter(gpuPod("solo", 1)).passed.size() == 1);  // n0 is held whole for the gang
  CHECK(lookups == 2);                                  // pods without the label never ask
}

TEST_CASE("gang: a gang ahead blocks only gangs that share its nodes, and leaves when its pods are gone",
          "[gang]") {
  FakeClock clock;
  Scheduler s(gangConfig(clock));
  addGpuNodes(s, 4);
  const std::vector<std::string> left = {"n0", "n1"}, right = {"n2", "n3"};
  REQUIRE(s.filter(gpuPod("solo", 8), left).passed.size() == 2);
  REQUIRE(s.reserve("uid-solo", "default", "solo", "n0").isOk());
  // "high" waits on the left (16 GPUs wanted, 8 free there). "low" uses only the right: it is
  // not behind "high", which cannot use those nodes.
  CHECK(s.filter(member("high", 0, 8, 2, 100), left).passed.empty());
  s.release("uid-solo");
  FilterResult low = s.filter(member("low", 0, 8, 2, 0), right);
  CHECK(low.passed.size() == 1);
  // A third gang on the left is behind "high", which fits there now.
  FilterResult third = s.filter(member("third", 0, 8, 2, 0), left);
  REQUIRE_FALSE(third.failed.empty());
  CHECK_THAT(third.failed.begin()->second, Catch::Contains("behind gang default/high"));
  // All of "high"'s pods are deleted: it leaves the line and "third" goes.
  s.forgetPod("uid-high-0");
  CHECK(s.filter(member("third", 0, 8, 2, 0), left).passed.size() == 1);
  CHECK(s.summary().gangs.held_gpus == 32);  // low's and third's plans only

  // A planned gang whose pods are all deleted gives its GPUs back at once.
  s.forgetPod("uid-third-0");
  CHECK(s.summary().gangs.held_gpus == 16);
  CHECK(s.summary().gangs.planned == 1);
}
