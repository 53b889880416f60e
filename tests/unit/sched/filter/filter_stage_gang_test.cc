// gangStage (filter_stage_gang.h): a gang member's filter ends the cycle with the gang book's
// answer; a gang a queue cannot admit whole is held back before any plan holds GPUs.
#include "troupe/sched/filter/filter_stage_gang.h"

#include <catch2/catch.hpp>

#include "support/filter_stage_fixture.h"
#include "troupe/sched/filter/filter_stage_queue.h"
#include "troupe/sched/filter/filter_stage_read.h"
#include "troupe/sched/filter/filter_stage_remember.h"

using namespace troupe::sched;
using troupe::testing::gpuPod;
using troupe::testing::StageFixture;

namespace {

void upToGang(FilterCycle& cycle, const FilterParts& parts) {
  REQUIRE(readPodStage(cycle, parts));
  REQUIRE(rememberPodStage(cycle, parts));
  REQUIRE(queueStage(cycle, parts));
}

}  // namespace

TEST_CASE("filter stage gang: a pod on its own passes through", "[filter-stage]") {
  StageFixture f;
  f.addNode("n0", 8);
  const std::vector<std::string> names{"n0"};
  const PodFacts pod = gpuPod("p", 2);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToGang(cycle, f.parts());
  CHECK(gangStage(cycle, f.parts()));
  CHECK(cycle.out.passed.empty());
  CHECK(f.gangs.empty());
}

TEST_CASE("filter stage gang: a member's filter plans its gang and ends the cycle", "[filter-stage]") {
  StageFixture f;
  f.addNode("n0", 8);
  f.addNode("n1", 8);
  const std::vector<std::string> names{"n0", "n1"};
  const PodFacts pod = gpuPod("m0", 4, {{kGangName, "g"}, {kGangSize, "2"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToGang(cycle, f.parts());
  std::vector<Completion> completions;
  cycle.completions = &completions;
  CHECK_FALSE(gangStage(cycle, f.parts()));
  CHECK(cycle.out.passed.size() == 1);
  CHECK_FALSE(f.gangs.empty());
  CHECK(f.gangs.progress("default/g").planned);
}

TEST_CASE("filter stage gang: a queue that cannot admit the whole gang holds back every node",
          "[filter-stage]") {
  StageFixture f;
  f.addNode("n0", 8);
  f.addNode("n1", 8);
  QueueSpec team;
  team.name = "team";
  team.limit.milli = 6000;
  f.queues.setQueues(QueueTree::build({team}));
  const std::vector<std::string> names{"n0", "n1"};
  const PodFacts pod = gpuPod("m0", 4, {{kGangName, "g"}, {kGangSize, "2"}, {kQueueKey, "team"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToGang(cycle, f.parts());
  std::vector<Completion> completions;
  cycle.completions = &completions;
  CHECK_FALSE(gangStage(cycle, f.parts()));
  CHECK(cycle.out.passed.empty());
  CHECK(cycle.out.failed.size() == 2);
  CHECK(cycle.out.categories.at("queue") == 2);
  CHECK_FALSE(f.gangs.progress("default/g").planned);
}
