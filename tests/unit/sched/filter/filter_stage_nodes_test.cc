// checkNodesStage (filter_stage_nodes.h): the node checks, with the passed nodes' states.
#include "troupe/sched/filter/filter_stage_nodes.h"

#include <catch2/catch.hpp>

#include "support/filter_stage_fixture.h"
#include "troupe/sched/filter/filter_stage_read.h"

using namespace troupe::sched;
using troupe::testing::gpuPod;
using troupe::testing::StageFixture;

TEST_CASE("filter stage nodes: passes the nodes that fit, with their states in step", "[filter-stage]") {
  StageFixture f;
  f.addNode("small", 2);
  f.addNode("big", 8);
  f.addNode("big2", 8);
  const std::vector<std::string> names{"small", "big", "gone", "big2"};
  const PodFacts pod = gpuPod("p", 4);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  REQUIRE(readPodStage(cycle, f.parts()));
  CHECK(checkNodesStage(cycle, f.parts()));
  CHECK(cycle.out.passed == std::vector<std::string>{"big", "big2"});
  REQUIRE(cycle.nodes_known);
  REQUIRE(cycle.passed_nodes.size() == 2);
  CHECK(cycle.passed_nodes[0]->info().name == "big");
  CHECK(cycle.passed_nodes[1]->info().name == "big2");
  CHECK(cycle.out.unresolvable.size() == 2);  // too small, ever; unknown
}
