// chooseGpusStage (filter_stage_gpus.h): with narrowing, the pod's GPUs on the one node left are
// chosen in the filter, as a bind would choose them, and are reused only while nothing they
// were chosen from changed.
#include "troupe/sched/filter/filter_stage_gpus.h"

#include <catch2/catch.hpp>

#include "support/filter_stage_fixture.h"
#include "troupe/sched/filter/filter_stage_narrow.h"
#include "troupe/sched/filter/filter_stage_nodes.h"
#include "troupe/sched/filter/filter_stage_read.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::gpuPod;
using troupe::testing::StageFixture;

namespace {

void upToGpus(StageFixture& f, FilterCycle& cycle) {
  REQUIRE(readPodStage(cycle, f.parts()));
  REQUIRE(checkNodesStage(cycle, f.parts()));
  REQUIRE(narrowStage(cycle, f.parts()));
}

}  // namespace

TEST_CASE("filter stage gpus: chooses on the node narrowing kept, as a bind there would", "[filter-stage]") {
  StageFixture f;
  f.narrow = true;
  f.addNode("n0", 8);
  f.addNode("n1", 8);
  model::Allocation held;
  held.pod_uid = "other";
  held.node = "n1";
  held.gpus = {0, 1, 2};
  REQUIRE(f.cluster.record(held).isOk());
  const std::vector<std::string> names{"n0", "n1"};
  const PodFacts pod = gpuPod("p", 2);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToGpus(f, cycle);
  REQUIRE(cycle.passed_nodes.size() == 1);
  CHECK(chooseGpusStage(cycle, f.parts()));
  REQUIRE(cycle.chosen);
  const model::NodeState& node = *cycle.passed_nodes.front();
  CHECK(cycle.chosen->ordinal == node.ordinal());
  CHECK(cycle.chosen->changes == node.changes());
  CHECK_FALSE(cycle.chosen->mix);  // a whole-GPU request does not depend on the mix
  const std::optional<Placement> fresh = chooseGpus(f.policy, node, cycle.request, nullptr);
  REQUIRE(fresh);
  CHECK(cycle.chosen->placement.gpus == fresh->gpus);
  CHECK(cycle.chosen->placement.gpus == placeOnNode(node, cycle.request)->gpus);
  // Reused while the node is unchanged; chosen again once it changes.
  REQUIRE(stillChosen(cycle.chosen, node, nullptr));
  CHECK(stillChosen(cycle.chosen, node, nullptr)->gpus == fresh->gpus);
  model::Allocation more;
  more.pod_uid = "more";
  more.node = node.info().name;
  more.gpus = {fresh->gpus.front()};
  REQUIRE(f.cluster.record(more).isOk());
  CHECK_FALSE(stillChosen(cycle.chosen, node, nullptr));
}

TEST_CASE("filter stage gpus: a share's GPU is the policy's, and tied to the mix it was chosen against",
          "[filter-stage]") {
  StageFixture f;
  f.narrow = true;
  f.addNode("n0", 4);
  const std::vector<std::string> names{"n0"};
  const PodFacts pod = gpuPod("p", 0, {{kAnnotationGpuMilli, "500"}});
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToGpus(f, cycle);
  REQUIRE(cycle.request.shared());
  CHECK(chooseGpusStage(cycle, f.parts()));
  REQUIRE(cycle.chosen);
  const std::shared_ptr<const RequestMix> mix = f.mix_window.current();
  CHECK(cycle.chosen->mix == mix);
  const model::NodeState& node = *cycle.passed_nodes.front();
  const Placement scored =
      scoreNode(f.policy, node, cycle.request, ScoreContext{mix.get(), nullptr}).placement;
  REQUIRE(scored.gpus.size() == 1);
  CHECK(cycle.chosen->placement.gpus == scored.gpus);
  CHECK(stillChosen(cycle.chosen, node, mix));
  CHECK_FALSE(stillChosen(cycle.chosen, node, std::make_shared<const RequestMix>(RequestMix::defaults())));
}

TEST_CASE("filter stage gpus: nothing is chosen without narrowing", "[filter-stage]") {
  StageFixture f;
  f.addNode("n0", 8);
  const std::vector<std::string> names{"n0"};
  const PodFacts pod = gpuPod("p", 2);
  const PodGroupInfo group = podGroupsUnread();
  FilterCycle cycle(pod, names, group);
  upToGpus(f, cycle);
  CHECK(chooseGpusStage(cycle, f.parts()));
  CHECK_FALSE(cycle.chosen);
}
