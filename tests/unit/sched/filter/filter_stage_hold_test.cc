// holdStage (filter_stage_hold.h): queue admission per GPU product, skipped for Kueue's pods.
#include "troupe/sched/filter/filter_stage_hold.h"

#include <catch2/catch.hpp>

#include "support/filter_stage_fixture.h"
#include "troupe/sched/filter/filter_stage_nodes.h"
#include "troupe/sched/filter/filter_stage_queue.h"
#include "troupe/sched/filter/filter_stage_read.h"
#include "troupe/sched/filter/filter_stage_remember.h"

using namespace troupe::sched;
using troupe::testing::gpuPod;
using troupe::testing::StageFixture;

namespace {

const std::string kH100 = "NVIDIA-H100-80GB-HBM3";
const std::string kA100 = "NVIDIA-A100-SXM4-80GB";

void upToHold(FilterCycle& cycle, const FilterParts& parts) {
  REQUIRE(readPodStage(cycle, parts));
  REQUIRE(rememberPodStage(cycle, parts));
  REQUIRE(queueStage(cycle, parts));
  REQUIRE(checkNodesStage(cycle, parts));
}

}  // namespace

TEST_CASE("filter stage hold: a queue at its limit for a product holds back that product's nodes",
          "[filter-stage]") {
  StageFixture f;
  f.addNode("h0", 8, kH100);
  f.addNode("a0", 8, kA100);
  f.addNode("h1", 8, kH100);
  QueueSpec team;
  team.name = "team";
  team.limit.milli = 10000;
  team.limit.product_milli[kH100] = 1000;
  f.queues.setQueues(QueueTree::build({team}));
  const std::vector<std::string> names{"h0", "a0", "h1"};
  const PodFacts pod = gpuPod("p", 2, {{kQueueKey, "team"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToHold(cycle, f.parts());
  REQUIRE(cycle.out.passed.size() == 3);
  CHECK(holdStage(cycle, f.parts()));
  CHECK(cycle.out.passed == std::vector<std::string>{"a0"});
  REQUIRE(cycle.passed_nodes.size() == 1);
  CHECK(cycle.passed_nodes[0]->info().name == "a0");
  CHECK(cycle.out.failed.size() == 2);
  CHECK(cycle.out.categories.at("queue") == 2);
}

TEST_CASE("filter stage hold: a pod without queue passes untouched", "[filter-stage]") {
  StageFixture f;
  f.addNode("h0", 8, kH100);
  const std::vector<std::string> names{"h0"};
  const PodFacts pod = gpuPod("p", 2);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToHold(cycle, f.parts());
  CHECK(holdStage(cycle, f.parts()));
  CHECK(cycle.out.passed == std::vector<std::string>{"h0"});
  CHECK(cycle.out.categories.count("queue") == 0);
}
