// Elastic gangs: a PodGroup's minimum changed while its gang waits (Scheduler::setGangMinimum,
// fed by the adapter's PodGroup watch). Lowered: the members parked at the barrier are released
// at once, and refused members are judged by the new minimum (planWakes offers them). Raised:
// the members not yet bound wait for the new minimum. Bound members are never touched.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "support/scheduler_fixture.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::addGpuNodes;
using troupe::testing::FakeClock;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

SchedulerConfig config(FakeClock& clock) {
  SchedulerConfig c;
  c.clock = [&clock] { return clock.t; };
  c.gang.timeout = std::chrono::seconds(120);
  return c;
}

PodFacts member(const std::string& group, int i, int gpus) {
  PodFacts p = gpuPod(group + "-" + std::to_string(i), gpus);
  p.scheduling_group = group;
  return p;
}

PodGroupInfo minOf(int min) { return PodGroupInfo{min, ""}; }

int freeGpus(Scheduler& s) {
  int free = 0;
  for (const auto& row : s.summary().by_product) free += row.whole_free;
  return free;
}

GangView gangView(const Scheduler& s, const std::string& key) {
  for (const GangView& v : s.gangs())
    if (v.key == key) return v;
  FAIL("no gang " << key);
  return {};
}

// Binds member i onto `node`; the answer lands in `answers[i]` ("" until answered, "ok" or the error).
void bindMember(Scheduler& s, const std::string& group, int i, const std::string& node,
                std::map<int, std::string>& answers) {
  const std::string name = group + "-" + std::to_string(i);
  answers[i] = "";
  s.bind("uid-" + name, "default", name, node,
         [&answers, i](Result<model::Allocation> r) { answers[i] = r.isOk() ? "ok" : r.status().message(); });
}

}  // namespace

TEST_CASE("elastic gang: a lowered minimum releases the members parked at the barrier",
          "[gang][elastic][native-podgroup]") {
  FakeClock clock;
  Scheduler s(config(clock));
  const auto names = addGpuNodes(s, 2);  // 16 GPUs: 4 members of 4 would fit
  std::map<int, std::string> answers;
  for (int i = 0; i < 3; ++i) {
    FilterResult r = s.filter(member("pg", i, 4), names, minOf(4));
    REQUIRE(r.passed.size() == 1);
    bindMember(s, "pg", i, r.passed[0], answers);
  }
  for (int i = 0; i < 3; ++i) CHECK(answers[i].empty());  // parked: 3 of 4
  CHECK(s.summary().gangs.held_gpus == 16);

  s.setGangMinimum("default/pg", 4, /*native=*/true);  // unchanged: nothing happens
  for (int i = 0; i < 3; ++i) CHECK(answers[i].empty());

  s.setGangMinimum("default/pg", 3, /*native=*/true);
  for (int i = 0; i < 3; ++i) CHECK(answers[i] == "ok");
  CHECK(s.summary().gangs.held_gpus == 0);  // the 4th slot's hold is given back
  CHECK(freeGpus(s) == 16 - 12);
  const GangView v = gangView(s, "default/pg");
  CHECK(v.state == GangView::State::kAdmitted);
  CHECK(v.min_member == 3);
  CHECK(v.bound == 3);
}

TEST_CASE("elastic gang: a minimum lowered below the members planned releases them as they bind",
          "[gang][elastic][native-podgroup]") {
  FakeClock clock;
  Scheduler s(config(clock));
  const auto names = addGpuNodes(s, 2);
  std::vector<std::string> planned;
  for (int i = 0; i < 4; ++i) planned.push_back(s.filter(member("pg", i, 4), names, minOf(4)).passed.at(0));
  s.setGangMinimum("default/pg", 2, /*native=*/true);  // nobody parked yet: the plan stays
  std::map<int, std::string> answers;
  bindMember(s, "pg", 0, planned[0], answers);
  CHECK(answers[0].empty());
  bindMember(s, "pg", 1, planned[1], answers);  // two of the new minimum of 2: released
  CHECK(answers[0] == "ok");
  CHECK(answers[1] == "ok");
  CHECK(s.summary().gangs.held_gpus == 0);
  // The other two are further members of an admitted gang: each fits on its own.
  for (int i = 2; i < 4; ++i) {
    FilterResult r = s.filter(member("pg", i, 4), names, minOf(2));
    REQUIRE(r.passed.size() >= 1);
    bindMember(s, "pg", i, r.passed[0], answers);
    CHECK(answers[i] == "ok");
  }
  CHECK(freeGpus(s) == 0);
}

TEST_CASE("elastic gang: a raised minimum holds the members not yet bound",
          "[gang][elastic][native-podgroup]") {
  FakeClock clock;
  Scheduler s(config(clock));
  const auto names = addGpuNodes(s, 2);
  std::map<int, std::string> answers;
  std::vector<std::string> planned;
  for (int i = 0; i < 3; ++i) planned.push_back(s.filter(member("pg", i, 4), names, minOf(3)).passed.at(0));
  bindMember(s, "pg", 0, planned[0], answers);
  bindMember(s, "pg", 1, planned[1], answers);
  CHECK(answers[0].empty());

  s.setGangMinimum("default/pg", 4, /*native=*/true);
  // The plan for 3 is too small: released, the parked binds fail and are planned afresh.
  CHECK_THAT(answers[0], Catch::Contains("raised its minimum to 4"));
  CHECK_THAT(answers[1], Catch::Contains("raised its minimum to 4"));
  CHECK(s.summary().gangs.held_gpus == 0);
  CHECK(freeGpus(s) == 16);

  // The 3 members (the filters now read 4) do not bind without a 4th.
  answers.clear();
  planned.clear();
  for (int i = 0; i < 3; ++i) planned.push_back(s.filter(member("pg", i, 4), names, minOf(4)).passed.at(0));
  for (int i = 0; i < 3; ++i) bindMember(s, "pg", i, planned[i], answers);
  for (int i = 0; i < 3; ++i) CHECK(answers[i].empty());
  planned.push_back(s.filter(member("pg", 3, 4), names, minOf(4)).passed.at(0));
  bindMember(s, "pg", 3, planned[3], answers);
  for (int i = 0; i < 4; ++i) CHECK(answers[i] == "ok");
}

TEST_CASE("elastic gang: bound members are never touched, whatever the minimum does",
          "[gang][elastic][native-podgroup]") {
  FakeClock clock;
  Scheduler s(config(clock));
  const auto names = addGpuNodes(s, 3);  // 24 GPUs
  std::map<int, std::string> answers;
  for (int i = 0; i < 2; ++i) {
    const std::string node = s.filter(member("pg", i, 4), names, minOf(2)).passed.at(0);
    bindMember(s, "pg", i, node, answers);
  }
  REQUIRE(answers[0] == "ok");
  REQUIRE(answers[1] == "ok");
  std::map<std::string, model::Allocation> before;
  for (int i = 0; i < 2; ++i)
    before["uid-pg-" + std::to_string(i)] = *s.allocationOf("uid-pg-" + std::to_string(i));
  auto unchanged = [&] {
    for (const auto& [uid, a] : before) {
      const std::optional<model::Allocation> now = s.allocationOf(uid);
      REQUIRE(now);
      CHECK(now->node == a.node);
      CHECK(now->gpus == a.gpus);
    }
  };

  // Raised above the bound members: the 3rd member waits for a 4th (4 - 2 bound = 2 to place).
  s.setGangMinimum("default/pg", 4, /*native=*/true);
  unchanged();
  CHECK(gangView(s, "default/pg").state != GangView::State::kAdmitted);
  const std::string third = s.filter(member("pg", 2, 4), names, minOf(4)).passed.at(0);
  bindMember(s, "pg", 2, third, answers);
  CHECK(answers[2].empty());
  unchanged();
  // Lowered to 3: the parked 3rd is enough (3 - 2 bound).
  s.setGangMinimum("default/pg", 3, /*native=*/true);
  CHECK(answers[2] == "ok");
  unchanged();
  // Lowered below the bound members: nothing to release, nothing taken away.
  s.setGangMinimum("default/pg", 1, /*native=*/true);
  unchanged();
  CHECK(s.allocationOf("uid-pg-2"));
  CHECK(s.summary().gangs.held_gpus == 0);
  CHECK(freeGpus(s) == 24 - 12);
}

TEST_CASE("elastic gang: only a gang that takes its minimum from that PodGroup changes", "[gang][elastic]") {
  FakeClock clock;
  Scheduler s(config(clock));
  const auto names = addGpuNodes(s, 2);
  // troupe.dev/gang names this gang; its size is its own annotation.
  for (int i = 0; i < 2; ++i)
    s.filter(gpuPod("t-" + std::to_string(i), 4, {{kGangName, "t"}, {kGangSize, "3"}}), names);
  s.setGangMinimum("default/t", 2, /*native=*/false);
  s.setGangMinimum("default/t", 2, /*native=*/true);
  CHECK(gangView(s, "default/t").min_member == 3);
  // A scheduler-plugins gang (the label) takes its PodGroup's, not a native one's.
  for (int i = 0; i < 2; ++i)
    s.filter(gpuPod("sp-" + std::to_string(i), 4, {{kPodGroupLabel, "sp"}}), names, minOf(3));
  s.setGangMinimum("default/sp", 2, /*native=*/true);
  CHECK(gangView(s, "default/sp").min_member == 3);
  s.setGangMinimum("default/sp", 2, /*native=*/false);
  CHECK(gangView(s, "default/sp").min_member == 2);
  // An unknown gang: nothing (it takes the minimum at its first filter).
  s.setGangMinimum("default/none", 2, /*native=*/true);
  for (const GangView& v : s.gangs()) CHECK(v.key != "default/none");
}

TEST_CASE("elastic gang: the waker offers refused members once a lowered minimum fits",
          "[gang][elastic][wake]") {
  FakeClock clock;
  Scheduler s(config(clock));
  const auto names = addGpuNodes(s, 3);  // 3 x 8: three members of 8 fit, four never
  for (int i = 0; i < 3; ++i) {
    FilterResult r = s.filter(member("pg", i, 8), names, minOf(4));
    CHECK(r.passed.empty());
  }
  WakePlanner planner;
  CHECK(s.planWakes(planner).empty());  // 4 x 8 GPUs fit nowhere

  s.setGangMinimum("default/pg", 3, /*native=*/true);
  std::vector<WakeCandidate> woken = s.planWakes(planner);
  std::vector<std::string> uids;
  for (const WakeCandidate& c : woken) uids.push_back(c.uid);
  std::sort(uids.begin(), uids.end());
  CHECK(uids == std::vector<std::string>{"uid-pg-0", "uid-pg-1", "uid-pg-2"});
  // Woken, they pass their next filter with the new minimum and bind whole.
  std::map<int, std::string> answers;
  for (int i = 0; i < 3; ++i) {
    FilterResult r = s.filter(member("pg", i, 8), names, minOf(3));
    REQUIRE(r.passed.size() == 1);
    bindMember(s, "pg", i, r.passed[0], answers);
  }
  for (int i = 0; i < 3; ++i) CHECK(answers[i] == "ok");

  // Raised again on an admitted gang: the bound members stay; a 4th waits (4 - 3 bound = 1
  // fits nowhere), and the waker does not offer it.
  s.setGangMinimum("default/pg", 5, /*native=*/true);
  CHECK(s.filter(member("pg", 3, 8), names, minOf(5)).passed.empty());
  for (const WakeCandidate& c : s.planWakes(planner)) CHECK(c.uid != "uid-pg-3");
  for (int i = 0; i < 3; ++i) CHECK(s.allocationOf("uid-pg-" + std::to_string(i)));
}
