// queueStage (filter_stage_queue.h): the pod's queue resolved once, kept in its pending record,
// and its demand noted in the queue book.
#include "troupe/sched/filter/filter_stage_queue.h"

#include <catch2/catch.hpp>

#include "support/filter_stage_fixture.h"
#include "troupe/sched/filter/filter_stage_read.h"
#include "troupe/sched/filter/filter_stage_remember.h"

using namespace troupe::sched;
using troupe::testing::gpuPod;
using troupe::testing::StageFixture;

namespace {

QueueSpec queueNamed(const std::string& name) {
  QueueSpec q;
  q.name = name;
  return q;
}

bool runUpToQueue(FilterCycle& cycle, const FilterParts& parts) {
  REQUIRE(readPodStage(cycle, parts));
  REQUIRE(rememberPodStage(cycle, parts));
  return queueStage(cycle, parts);
}

}  // namespace

TEST_CASE("filter stage queue: without queues the pod has none", "[filter-stage]") {
  StageFixture f;
  const std::vector<std::string> names{"n0"};
  const PodFacts pod = gpuPod("p", 1, {{kQueueKey, "team"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  CHECK(runUpToQueue(cycle, f.parts()));
  CHECK(cycle.queue.empty());
  CHECK_FALSE(f.pending.find(pod.uid)->resolved_queue);
}

TEST_CASE("filter stage queue: resolves the queue once, keeps it in the record, notes the demand",
          "[filter-stage]") {
  StageFixture f;
  f.queues.setQueues(QueueTree::build({queueNamed("team")}));
  const std::vector<std::string> names{"n0"};
  const PodFacts pod = gpuPod("p", 2, {{kQueueKey, "team"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  REQUIRE(runUpToQueue(cycle, f.parts()));
  CHECK(cycle.queue == "team");
  REQUIRE(f.pending.find(pod.uid)->resolved_queue);
  CHECK(*f.pending.find(pod.uid)->resolved_queue == "team");
  const std::optional<QueuedPod> queued = f.queues.pod(pod.uid);
  REQUIRE(queued);
  CHECK(queued->queue == "team");
  CHECK(queued->milli == 2000);
  CHECK(queued->since == f.t);
}

TEST_CASE("filter stage queue: an unknown queue ends the cycle, every node unresolvable", "[filter-stage]") {
  StageFixture f;
  f.queues.setQueues(QueueTree::build({queueNamed("team")}));
  const std::vector<std::string> names{"n0", "n1"};
  const PodFacts pod = gpuPod("p", 1, {{kQueueKey, "nope"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  CHECK_FALSE(runUpToQueue(cycle, f.parts()));
  CHECK(cycle.out.categories.at("queue") == 2);
  CHECK(cycle.out.unresolvable.size() == 2);
  CHECK_FALSE(f.queues.pod(pod.uid));
}
