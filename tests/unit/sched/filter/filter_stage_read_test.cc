// readPodStage (filter_stage_read.h): the request, gang and Kueue placement read once per cycle.
#include "troupe/sched/filter/filter_stage_read.h"

#include <catch2/catch.hpp>

#include "support/filter_stage_fixture.h"
#include "troupe/sched/gang/gang.h"

using namespace troupe::sched;
using troupe::testing::gpuPod;
using troupe::testing::StageFixture;

TEST_CASE("filter stage read: writes the request and the gang of a valid pod", "[filter-stage]") {
  StageFixture f;
  const std::vector<std::string> names{"n0", "n1"};
  const PodFacts pod = gpuPod("p", 2, {{kGangName, "g"}, {kGangSize, "3"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  REQUIRE(readPodStage(cycle, f.parts()));
  CHECK(cycle.fingerprint == podFingerprint(pod));
  CHECK(cycle.request.gpus == 2);
  REQUIRE(cycle.gang);
  CHECK(cycle.gang->min_member == 3);
  CHECK(cycle.in_gang);
  CHECK_FALSE(cycle.kueue_placed);
  CHECK(cycle.out.unresolvable.empty());
}

TEST_CASE("filter stage read: an invalid pod ends the cycle, every node unresolvable", "[filter-stage]") {
  StageFixture f;
  const std::vector<std::string> names{"n0", "n1"};
  const PodFacts pod = gpuPod("p", 1, {{kAnnotationGpuMilli, "nonsense"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  CHECK_FALSE(readPodStage(cycle, f.parts()));
  CHECK(cycle.out.unresolvable.size() == 2);
  CHECK(cycle.out.categories.at("invalid-pod") == 2);
  CHECK(cycle.out.passed.empty());
}

TEST_CASE("filter stage read: reuses the request the pending record holds for an unchanged pod",
          "[filter-stage]") {
  StageFixture f;
  const std::vector<std::string> names{"n0"};
  const PodFacts pod = gpuPod("p", 1);
  // A record made from another request than the pod's own proves the pod is not parsed again.
  GpuRequest recorded;
  recorded.gpus = 4;
  f.pending.remember(pod, recorded, podFingerprint(pod));
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  REQUIRE(readPodStage(cycle, f.parts()));
  CHECK(cycle.request.gpus == 4);
  // A changed pod is parsed again.
  PodFacts changed = pod;
  changed.annotations["something"] = "else";
  FilterCycle again(changed, names, group);
  REQUIRE(readPodStage(again, f.parts()));
  CHECK(again.request.gpus == 1);
}
