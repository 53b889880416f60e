// Kubernetes' own PodGroups (scheduling.k8s.io/v1alpha2) as a gang source: a pod's
// spec.schedulingGroup wins over every other key, the PodGroup's minCount is the minimum (a
// `basic` policy: no gang), troupe.dev/gang-size stands in when the object cannot be read, the
// group's topology key acts like troupe.dev/topology-required, the admission notice names the
// nodes, and the whole gang reaching bind at once (kube-scheduler's PodGroup cycle) binds
// all members or none.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

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

const auto kDefault = std::chrono::milliseconds(300000);

PodFacts nativeMember(const std::string& group, int index, int gpus, const StringMap& annotations = {}) {
  PodFacts p = gpuPod(group + "-" + std::to_string(index), gpus, annotations);
  p.scheduling_group = group;
  return p;
}

PodGroupInfo gangOf(int min, std::string topology_key = "") {
  PodGroupInfo info;
  info.min_member = min;
  info.topology_key = std::move(topology_key);
  return info;
}

SchedulerConfig config(FakeClock& clock) {
  SchedulerConfig c;
  c.clock = [&clock] { return clock.t; };
  c.gang.timeout = std::chrono::seconds(30);
  return c;
}

int freeGpus(Scheduler& s) {
  int free = 0;
  for (const auto& row : s.summary().by_product) free += row.whole_free;
  return free;
}

}  // namespace

TEST_CASE("native PodGroup: spec.schedulingGroup names the gang and wins over every key but troupe.dev/gang",
          "[gang][native-podgroup]") {
  PodFacts p = nativeMember("pg", 0, 1, {{kGangSize, "2"}, {kVolcanoGroup, "v"}});
  p.labels[kPodGroupLabel] = "sp";
  CHECK(gangKeyOf(p) == "default/pg");
  CHECK(podGroupName(p) == nullptr);  // not a scheduler-plugins lookup
  auto g = parseGang(p, kDefault, gangOf(6));
  REQUIRE(g.isOk());
  REQUIRE(g.value());
  CHECK(g.value()->key == "default/pg");
  CHECK(g.value()->source == kSchedulingGroup);
  CHECK(g.value()->native());
  CHECK(g.value()->min_member == 6);  // the object wins over troupe.dev/gang-size
}

TEST_CASE("native PodGroup: troupe.dev/gang wins over the Job controller's PodGroup (WorkloadWithJob)",
          "[gang][native-podgroup]") {
  // With WorkloadWithJob the Job controller names a PodGroup in every Job's pods, `basic` unless
  // the Job asks for a gang: the Job's own troupe.dev/gang must still make its pods one gang.
  PodFacts p = nativeMember("job-pg", 0, 1, {{kGangName, "train"}, {kGangSize, "4"}});
  CHECK(gangKeyOf(p) == "default/train");  // bound members count where parseGang puts them
  int asked = 0;
  const PodGroupLookup native = [&](const std::string&, const std::string&) {
    ++asked;
    PodGroupInfo basic;
    basic.basic = true;
    return basic;
  };
  const PodGroupInfo info = podGroupFor(p, {}, native);
  CHECK(asked == 0);  // not needed: the annotation names the gang and its size
  for (const PodGroupInfo& group : {info, native("default", "job-pg"), gangOf(9)}) {
    auto g = parseGang(p, kDefault, group);
    REQUIRE(g.isOk());
    REQUIRE(g.value());
    CHECK(g.value()->key == "default/train");
    CHECK(g.value()->source == std::string(kGangName));
    CHECK_FALSE(g.value()->native());
    CHECK(g.value()->min_member == 4);
  }
}

TEST_CASE("native PodGroup: basic policy, missing object and the reasons", "[gang][native-podgroup]") {
  SECTION("a basic policy is no gang: the pod is scheduled on its own") {
    PodGroupInfo basic;
    basic.basic = true;
    auto g = parseGang(nativeMember("pg", 0, 1, {{kGangSize, "3"}}), kDefault, basic);
    REQUIRE(g.isOk());
    CHECK_FALSE(g.value());
  }
  SECTION("unread object: troupe.dev/gang-size stands in") {
    auto g = parseGang(nativeMember("pg", 0, 1, {{kGangSize, "3"}}), kDefault, podGroupsUnread());
    REQUIRE(g.isOk());
    CHECK(g.value()->min_member == 3);
    CHECK(g.value()->native());
  }
  SECTION("neither: the reason says what is missing and both fixes") {
    PodGroupInfo absent{std::nullopt, "the API scheduling.k8s.io/v1alpha2 (PodGroups) is not served"};
    auto e = parseGang(nativeMember("pg", 0, 1), kDefault, absent);
    REQUIRE_FALSE(e.isOk());
    CHECK_THAT(e.status().message(), Catch::Contains("default/pg"));
    CHECK_THAT(e.status().message(), Catch::Contains("is not served"));
    CHECK_THAT(e.status().message(), Catch::Contains("spec.schedulingPolicy.gang.minCount"));
    CHECK_THAT(e.status().message(), Catch::Contains("troupe.dev/gang-size"));
    CHECK_THAT(e.status().message(), Catch::Contains("scheduling.k8s.io/v1alpha2"));
  }
  SECTION("a bad gang-size is still an error when the object is missing") {
    auto e = parseGang(nativeMember("pg", 0, 1, {{kGangSize, "-1"}}), kDefault, podGroupsUnread());
    REQUIRE_FALSE(e.isOk());
    CHECK_THAT(e.status().message(), Catch::Contains("troupe.dev/gang-size"));
  }
}

TEST_CASE("native PodGroup: podGroupFor asks the native lookup, never the scheduler-plugins one",
          "[gang][native-podgroup]") {
  std::vector<std::string> asked;
  const PodGroupLookup plugins = [&](const std::string& ns, const std::string& name) {
    asked.push_back("plugins " + ns + "/" + name);
    return PodGroupInfo{1, ""};
  };
  const PodGroupLookup native = [&](const std::string& ns, const std::string& name) {
    asked.push_back("native " + ns + "/" + name);
    return gangOf(4);
  };
  PodFacts p = nativeMember("pg", 0, 1);
  p.labels[kPodGroupLabel] = "sp";
  CHECK(*podGroupFor(p, plugins, native).min_member == 4);
  CHECK(asked == std::vector<std::string>{"native default/pg"});
  // Without a native reader (standalone): unread, and the reason says so.
  const PodGroupInfo unread = podGroupFor(p, plugins);
  CHECK_FALSE(unread.min_member);
  CHECK_THAT(unread.absent, Catch::Contains("without the Kubernetes API"));
  CHECK(asked.size() == 1);
  // A pod without spec.schedulingGroup still reads the scheduler-plugins group.
  p.scheduling_group.clear();
  CHECK(*podGroupFor(p, plugins, native).min_member == 1);
}

TEST_CASE("native PodGroup: the topology key is resolved against topology.levels",
          "[gang][native-podgroup]") {
  const std::vector<std::string> levels = {"topology.kubernetes.io/zone", "troupe.dev/block",
                                           "troupe.dev/rack"};
  GangSpec spec;
  spec.key = "ml/train";
  CHECK(gangTopologyLevel(spec, levels).value() == -1);
  spec.topology_key = "troupe.dev/rack";
  CHECK(gangTopologyLevel(spec, levels).value() == 2);
  spec.topology_key = "example.com/superpod";
  auto e = gangTopologyLevel(spec, levels);
  REQUIRE_FALSE(e.isOk());
  CHECK_THAT(e.status().message(), Catch::Contains("example.com/superpod"));
  CHECK_THAT(e.status().message(), Catch::Contains("topology.levels"));
  CHECK_THAT(e.status().message(), Catch::Contains("troupe.dev/rack"));
  auto none = gangTopologyLevel(spec, {});
  REQUIRE_FALSE(none.isOk());
  CHECK_THAT(none.status().message(), Catch::Contains("topology.levels"));
}

TEST_CASE("native PodGroup: a topology key keeps the gang inside one domain, an unknown key is the reason",
          "[gang][native-podgroup]") {
  FakeClock clock;
  Scheduler s(config(clock));
  // r1: n0 and n1 with 4 free GPUs each; r2: n2..n4 with 4, 5 and 6 free. Node order alone
  // would spread the gang over both racks.
  const std::map<std::string, std::pair<std::string, int>> fleet = {
      {"n0", {"r1", 4}}, {"n1", {"r1", 4}}, {"n2", {"r2", 4}}, {"n3", {"r2", 3}}, {"n4", {"r2", 2}}};
  std::vector<std::string> names;
  for (const auto& [name, place] : fleet) {
    model::NodeFacts f = gpuNode(name, 8);
    f.labels["troupe.dev/rack"] = place.first;
    f.labels["troupe.dev/block"] = "b";
    f.labels["topology.kubernetes.io/zone"] = "z";
    REQUIRE(s.upsertNode(f).isOk());
    model::Allocation a;
    a.pod_uid = "other-" + name;
    a.pod_key = "default/other-" + name;
    a.node = name;
    for (int g = 0; g < place.second; ++g) a.gpus.push_back(g);
    REQUIRE(s.recordAllocation(a).isOk());
    names.push_back(name);
  }
  std::set<std::string> racks;
  for (int i = 0; i < 3; ++i) {
    FilterResult r = s.filter(nativeMember("train", i, 4), names, gangOf(3, "troupe.dev/rack"));
    REQUIRE(r.passed.size() == 1);
    racks.insert(fleet.at(r.passed[0]).first);
  }
  CHECK(racks == std::set<std::string>{"r2"});

  FilterResult bad = s.filter(nativeMember("other", 0, 1), names, gangOf(2, "example.com/superpod"));
  CHECK(bad.passed.empty());
  REQUIRE(bad.unresolvable.size() == names.size());
  CHECK_THAT(bad.unresolvable.begin()->second, Catch::Contains("example.com/superpod"));
  CHECK_THAT(bad.unresolvable.begin()->second, Catch::Contains("topology.levels"));
}

TEST_CASE("native PodGroup: admission is noticed once, native, with the nodes", "[gang][native-podgroup]") {
  FakeClock clock;
  Scheduler s(config(clock));
  std::vector<GangNotice> seen;
  std::mutex mu;
  s.setGangObserver([&](const GangNotice& n) {
    std::lock_guard lock(mu);
    seen.push_back(n);
  });
  const auto names = addGpuNodes(s, 2);
  std::vector<std::string> planned;
  for (int i = 0; i < 3; ++i)
    planned.push_back(s.filter(nativeMember("pg", i, 4), names, gangOf(3)).passed.at(0));
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i) {
    s.bind("uid-pg-" + std::to_string(i), "default", "pg-" + std::to_string(i), planned[i],
           [&](Result<model::Allocation> r) { ok += r.isOk() ? 1 : 0; });
  }
  CHECK(ok == 3);
  std::vector<GangNotice> admitted;
  for (const GangNotice& n : seen) {
    CHECK(n.native);
    if (n.kind == GangNotice::Kind::kAdmitted) admitted.push_back(n);
  }
  REQUIRE(admitted.size() == 1);
  CHECK(admitted[0].gang == "default/pg");
  CHECK(admitted[0].pod_uid.empty());
  CHECK_THAT(admitted[0].message, Catch::Contains("3 members"));
  for (const std::string& node : std::set<std::string>(planned.begin(), planned.end()))
    CHECK_THAT(admitted[0].message, Catch::Contains(node));

  // A gang named by Troupe's own key gets the notice too, but not marked native.
  seen.clear();
  std::vector<std::string> other;
  for (int i = 0; i < 2; ++i) {
    PodFacts p = gpuPod("t-" + std::to_string(i), 1, {{kGangName, "t"}, {kGangSize, "2"}});
    other.push_back(s.filter(p, names).passed.at(0));
  }
  for (int i = 0; i < 2; ++i)
    s.bind("uid-t-" + std::to_string(i), "default", "t-" + std::to_string(i), other[i], [](auto) {});
  bool saw = false;
  for (const GangNotice& n : seen) {
    if (n.kind != GangNotice::Kind::kAdmitted) continue;
    saw = true;
    CHECK_FALSE(n.native);
  }
  CHECK(saw);
}

TEST_CASE("native PodGroup: members binding concurrently bind all together or none holds GPUs",
          "[gang][native-podgroup][concurrency]") {
  // kube-scheduler's PodGroup cycle filters every member, then starts all binding cycles at
  // once: the barrier gets the binds from many threads in the same instant, in any order.
  // Sometimes a member never arrives (its cycle failed): then the barrier times out.
  std::mt19937 rng(20261202);
  for (int round = 0; round < 40; ++round) {
    FakeClock clock;
    Scheduler s(config(clock));
    const auto names = addGpuNodes(s, 4);
    const int total = freeGpus(s);
    const int members = 2 + static_cast<int>(rng() % 7);  // 2..8 members of 2 or 4 GPUs
    const int gpus = rng() % 2 ? 2 : 4;
    INFO("round " << round << ": " << members << " members of " << gpus << " GPUs");
    std::vector<std::string> planned;
    for (int i = 0; i < members; ++i) {
      FilterResult r = s.filter(nativeMember("pg", i, gpus), names, gangOf(members));
      REQUIRE(r.passed.size() == 1);
      planned.push_back(r.passed[0]);
    }
    std::vector<int> order(static_cast<size_t>(members));
    for (int i = 0; i < members; ++i) order[static_cast<size_t>(i)] = i;
    std::shuffle(order.begin(), order.end(), rng);
    const bool one_missing = rng() % 3 == 0;
    const int arriving = one_missing ? members - 1 : members;

    std::atomic<int> ready{0}, answered{0}, bound{0};
    std::vector<std::thread> threads;
    for (int k = 0; k < arriving; ++k) {
      const int i = order[static_cast<size_t>(k)];
      threads.emplace_back([&, i] {
        ++ready;
        while (ready.load() < arriving) std::this_thread::yield();  // all start together
        s.bind("uid-pg-" + std::to_string(i), "default", "pg-" + std::to_string(i),
               planned[static_cast<size_t>(i)], [&](Result<model::Allocation> r) {
                 bound += r.isOk() ? 1 : 0;
                 ++answered;
               });
      });
    }
    for (std::thread& t : threads) t.join();
    if (!one_missing) {
      CHECK(answered == members);
      CHECK(bound == members);
      CHECK(freeGpus(s) == total - members * gpus);
      CHECK(s.summary().gangs.held_gpus == 0);
      continue;
    }
    CHECK(answered == 0);  // all parked at the barrier
    clock.t += std::chrono::seconds(31);
    s.tick();
    CHECK(answered == arriving);
    CHECK(bound == 0);
    CHECK(freeGpus(s) == total);
    CHECK(s.summary().gangs.held_gpus == 0);
  }
}

TEST_CASE("native PodGroup: a plan no bind reaches within the timeout is released, even while filters go on",
          "[gang][native-podgroup]") {
  // kube-scheduler's PodGroup cycle failed elsewhere (a member fits no node by another plugin):
  // its members are filtered again on every retry, but none is bound.
  FakeClock clock;
  Scheduler s(config(clock));
  std::vector<GangNotice> refused;
  std::mutex mu;
  s.setGangObserver([&](const GangNotice& n) {
    std::lock_guard lock(mu);
    if (n.kind == GangNotice::Kind::kRefused) refused.push_back(n);
  });
  const auto names = addGpuNodes(s, 2);
  for (int i = 0; i < 3; ++i)
    REQUIRE(s.filter(nativeMember("pg", i, 4), names, gangOf(4)).passed.size() == 1);
  CHECK(s.summary().gangs.held_gpus == 16);
  for (int step = 0; step < 6; ++step) {  // retries every 5 s keep filtering
    clock.t += std::chrono::seconds(5);
    s.filter(nativeMember("pg", step % 3, 4), names, gangOf(4));
    s.tick();
  }
  CHECK(s.summary().gangs.held_gpus == 16);  // 30 s: not yet
  clock.t += std::chrono::seconds(1);
  s.tick();
  CHECK(s.summary().gangs.held_gpus == 0);
  CHECK(freeGpus(s) == 16);
  REQUIRE(refused.size() == 1);
  CHECK_THAT(refused[0].message, Catch::Contains("brought no member to bind within 30s"));
  // Retries of the same three members hold nothing: the fourth never reached Troupe.
  for (int step = 0; step < 3; ++step) {
    clock.t += std::chrono::seconds(20);
    FilterResult r = s.filter(nativeMember("pg", step, 4), names, gangOf(4));
    CHECK(r.passed.empty());
    REQUIRE(r.failed.size() == names.size());
    CHECK_THAT(r.failed.begin()->second, Catch::Contains("only 3 of 4 members reached Troupe's filter"));
    s.tick();
    CHECK(s.summary().gangs.held_gpus == 0);
  }
  // Once the fourth comes (its blocker gone), the gang is planned again and a whole cycle binds it.
  std::vector<std::string> planned(4);
  planned[3] = s.filter(nativeMember("pg", 3, 4), names, gangOf(4)).passed.at(0);
  for (int i = 0; i < 3; ++i)
    planned[static_cast<size_t>(i)] = s.filter(nativeMember("pg", i, 4), names, gangOf(4)).passed.at(0);
  int ok = 0;
  for (int i = 0; i < 4; ++i) {
    s.bind("uid-pg-" + std::to_string(i), "default", "pg-" + std::to_string(i),
           planned[static_cast<size_t>(i)], [&](Result<model::Allocation> r) { ok += r.isOk() ? 1 : 0; });
  }
  CHECK(ok == 4);
  CHECK(freeGpus(s) == 0);
}

TEST_CASE("native PodGroup: gangs of other keys keep their plan while filtered", "[gang][native-podgroup]") {
  FakeClock clock;
  Scheduler s(config(clock));
  const auto names = addGpuNodes(s, 2);
  for (int i = 0; i < 3; ++i) {
    PodFacts p = gpuPod("t-" + std::to_string(i), 4, {{kGangName, "t"}, {kGangSize, "4"}});
    REQUIRE(s.filter(p, names).passed.size() == 1);
  }
  for (int step = 0; step < 12; ++step) {
    clock.t += std::chrono::seconds(5);
    s.filter(gpuPod("t-0", 4, {{kGangName, "t"}, {kGangSize, "4"}}), names);
    s.tick();
  }
  CHECK(s.summary().gangs.held_gpus == 16);
}
