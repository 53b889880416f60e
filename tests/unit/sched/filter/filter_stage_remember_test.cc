// rememberPodStage (filter_stage_remember.h): the pending record, tombstones and the mix.
#include "troupe/sched/filter/filter_stage_remember.h"

#include <catch2/catch.hpp>

#include "support/filter_stage_fixture.h"
#include "troupe/sched/filter/filter_stage_read.h"

using namespace troupe::sched;
using troupe::testing::gpuPod;
using troupe::testing::StageFixture;

TEST_CASE("filter stage remember: records the pod once in the mix, with a new seq each cycle",
          "[filter-stage]") {
  StageFixture f;
  const std::vector<std::string> names{"n0"};
  const PodFacts pod = gpuPod("p", 2);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle first(pod, names, group);
  REQUIRE(readPodStage(first, f.parts()));
  REQUIRE(rememberPodStage(first, f.parts()));
  CHECK(first.seq > 0);
  REQUIRE(f.pending.find(pod.uid));
  CHECK(f.pending.find(pod.uid)->request.gpus == 2);
  CHECK(f.mix_window.remembers(pod.uid));
  FilterCycle second(pod, names, group);
  REQUIRE(readPodStage(second, f.parts()));
  REQUIRE(rememberPodStage(second, f.parts()));
  CHECK(second.seq > first.seq);
}

TEST_CASE("filter stage remember: a deleted pod ends the cycle as invalid", "[filter-stage]") {
  StageFixture f;
  const std::vector<std::string> names{"n0", "n1", "n2"};
  const PodFacts pod = gpuPod("p", 1);
  f.pending.forget(pod.uid);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  REQUIRE(readPodStage(cycle, f.parts()));
  CHECK_FALSE(rememberPodStage(cycle, f.parts()));
  CHECK(cycle.out.categories.at("invalid-pod") == 3);
  CHECK(cycle.out.unresolvable.size() == 3);
  CHECK_FALSE(f.pending.find(pod.uid));
  CHECK_FALSE(f.mix_window.remembers(pod.uid));
}
