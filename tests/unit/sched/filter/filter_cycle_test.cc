// The per-cycle record (filter_cycle.h): refusing every node, and recordCycle keeping what the
// cycle decided in the pod's pending record.
#include "troupe/sched/filter/filter_cycle.h"

#include <catch2/catch.hpp>

#include "support/filter_stage_fixture.h"
#include "troupe/sched/filter/filter_stage_nodes.h"
#include "troupe/sched/filter/filter_stage_queue.h"
#include "troupe/sched/filter/filter_stage_read.h"
#include "troupe/sched/filter/filter_stage_remember.h"

using namespace troupe::sched;
using troupe::testing::gpuPod;
using troupe::testing::StageFixture;

TEST_CASE("filter cycle: refuseAll marks every node unresolvable in its category", "[filter-stage]") {
  const std::vector<std::string> names{"a", "b"};
  const PodFacts pod = gpuPod("p", 1);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  cycle.refuseAll("troupe: no", "queue");
  CHECK(cycle.out.unresolvable.size() == 2);
  CHECK(cycle.out.categories.at("queue") == 2);
  CHECK(cycle.out.passed.empty());
}

TEST_CASE("filter cycle: recordCycle keeps the passed nodes and the queue in the pending record",
          "[filter-stage]") {
  StageFixture f;
  f.addNode("n0", 8);
  f.addNode("n1", 2);
  QueueSpec team;
  team.name = "team";
  f.queues.setQueues(QueueTree::build({team}));
  const std::vector<std::string> names{"n0", "n1"};
  const PodFacts pod = gpuPod("p", 4, {{kQueueKey, "team"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  const FilterParts parts = f.parts();
  REQUIRE(readPodStage(cycle, parts));
  REQUIRE(rememberPodStage(cycle, parts));
  REQUIRE(queueStage(cycle, parts));
  REQUIRE(checkNodesStage(cycle, parts));
  recordCycle(cycle, parts);
  const std::optional<PendingPod> record = f.pending.find(pod.uid);
  REQUIRE(record);
  CHECK(record->filtered);
  CHECK(record->passed.size() == 1);
  CHECK(record->passed.contains(f.cluster.find("n0")->ordinal()));
  CHECK(record->queue == "team");
  CHECK(record->gang_min == 0);
  CHECK(record->births == f.cluster.births());
}
