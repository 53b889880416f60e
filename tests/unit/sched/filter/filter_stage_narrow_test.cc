// narrowStage (filter_stage_narrow.h): the policy's best node only, when narrowing is on.
#include "troupe/sched/filter/filter_stage_narrow.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "support/filter_stage_fixture.h"
#include "troupe/sched/filter/filter_stage_nodes.h"
#include "troupe/sched/filter/filter_stage_read.h"
#include "troupe/sched/filter/node_filter.h"

using namespace troupe::sched;
using troupe::testing::gpuPod;
using troupe::testing::StageFixture;

namespace {

void upToNarrow(StageFixture& f, FilterCycle& cycle) {
  f.addNode("n0", 8);
  f.addNode("n1", 4);
  f.addNode("n2", 8);
  REQUIRE(readPodStage(cycle, f.parts()));
  REQUIRE(checkNodesStage(cycle, f.parts()));
  REQUIRE(cycle.out.passed.size() == 3);
}

}  // namespace

TEST_CASE("filter stage narrow: off, every passing node stays", "[filter-stage]") {
  StageFixture f;
  const std::vector<std::string> names{"n0", "n1", "n2"};
  const PodFacts pod = gpuPod("p", 2);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToNarrow(f, cycle);
  CHECK(narrowStage(cycle, f.parts()));
  CHECK(cycle.out.passed.size() == 3);
}

TEST_CASE("filter stage narrow: on, keeps the node narrowToBest picks, its state in step", "[filter-stage]") {
  StageFixture f;
  f.narrow = true;
  const std::vector<std::string> names{"n0", "n1", "n2"};
  const PodFacts pod = gpuPod("p", 2);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToNarrow(f, cycle);
  // What narrowToBest picks from the same answer, scored afresh.
  FilterResult expected = cycle.out;
  narrowToBest(*f.policy, cycle.request, f.mix_window.current(), nullptr, cycle.passed_nodes, expected);
  CHECK(narrowStage(cycle, f.parts()));
  REQUIRE(cycle.out.passed.size() == 1);
  CHECK(cycle.out.passed == expected.passed);
  REQUIRE(cycle.passed_nodes.size() == 1);
  CHECK(cycle.passed_nodes[0]->info().name == cycle.out.passed[0]);
}
