// A native PodGroup's spec.priority (v1beta1+) places its gang in Troupe's line of waiting gangs
// instead of its members' pod priority: a group with a higher priority goes first, even when
// its pods have none and it came later.
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

using namespace troupe;
using namespace troupe::sched;
using troupe::testing::gpuNode;
using troupe::testing::gpuPod;

namespace {

PodFacts member(const std::string& group, int i, int64_t pod_priority) {
  PodFacts p = gpuPod(group + "-" + std::to_string(i), 8);
  p.scheduling_group = group;
  p.priority = pod_priority;
  return p;
}

PodGroupInfo groupOf(int min, std::optional<int32_t> priority) {
  PodGroupInfo info{min, ""};
  info.priority = priority;
  return info;
}

// Two gangs of 2 x 8 GPUs on 2 x 8: one at a time. Both wait while the nodes are full ("low"
// first, its pods at priority 50; "high" later, its pods at 0, its PodGroup at `high_priority`);
// then the nodes free up and "low" is filtered first. Returns its reason, "" when it was planned.
std::string lowAfterCapacityFrees(std::optional<int32_t> high_priority) {
  Scheduler s{SchedulerConfig{}};
  const std::vector<std::string> names{"n0", "n1"};
  for (const std::string& n : names) REQUIRE(s.upsertNode(gpuNode(n, 8)).isOk());
  for (int i = 0; i < 2; ++i) {
    model::Allocation a;
    a.pod_uid = "filler-" + std::to_string(i);
    a.pod_key = "default/filler-" + std::to_string(i);
    a.node = names[static_cast<size_t>(i)];
    a.gpus = {0, 1, 2, 3, 4, 5, 6, 7};
    REQUIRE(s.recordAllocation(a).isOk());
  }
  CHECK(s.filter(member("low", 0, 50), names, groupOf(2, std::nullopt)).passed.empty());
  CHECK(s.filter(member("high", 0, 0), names, groupOf(2, high_priority)).passed.empty());
  REQUIRE(s.release("filler-0"));
  REQUIRE(s.release("filler-1"));
  const FilterResult r = s.filter(member("low", 1, 50), names, groupOf(2, std::nullopt));
  if (!r.passed.empty()) return "";
  return r.failed.contains("n0") ? r.failed.at("n0") : std::string("refused without a reason");
}

}  // namespace

TEST_CASE("PodGroup priority: a group's own priority places its gang ahead of pods' priorities",
          "[gang][native-podgroup][podgroup-priority]") {
  // Without a PodGroup priority, the gang whose pods rank higher (and came first) goes first.
  CHECK(lowAfterCapacityFrees(std::nullopt).empty());
  // The PodGroup's priority 100 ranks above the other gang's pods at 50: that gang waits its turn.
  CHECK_THAT(lowAfterCapacityFrees(100), Catch::Contains("waits its turn behind gang default/high"));
  // A PodGroup priority below the other gang's pods does not put it ahead.
  CHECK(lowAfterCapacityFrees(10).empty());
}
