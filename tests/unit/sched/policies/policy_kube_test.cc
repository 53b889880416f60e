// The kube policy: kube-scheduler's LeastAllocated + BalancedAllocation, random ties.
#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;

TEST_CASE("kube: the node with more CPU and memory left wins, GPUs do not count", "[policy][kube]") {
  tt::SmallCluster c;
  tt::SmallCluster::use(c.add("loaded", 8, "NVIDIA-L4", "16", "64Gi"), {}, 1000, 12000);
  troupe::model::NodeState& idle = c.add("idle", 8, "NVIDIA-L4", "16", "64Gi");
  tt::SmallCluster::use(idle, {0, 1, 2, 3, 4, 5});  // GPUs in use are invisible to it
  const auto policy = tt::builtin("kube");
  CHECK(c.best(*policy, tt::request(1, 1000, 2000)) == "idle");
  CHECK(policy->tieBreak() == troupe::sched::TieBreak::kRandom);
  // 0..200 mapped onto 0..1 for prioritize.
  const double value = policy->score(idle, tt::request(1, 1000, 2000), {}).value;
  CHECK(policy->unitScore(idle, tt::request(1, 1000, 2000), {}, {}) == Approx(value / 200));
}

TEST_CASE("kube: equal nodes tie, and a stream breaks the tie by reservoir draws", "[policy][kube]") {
  const auto policy = tt::builtin("kube");
  std::vector<int> asked;
  const troupe::sched::Draw draw = [&](int n) {
    asked.push_back(n);
    return 0;  // always take the newest tied node
  };
  auto equal = [](size_t) { return 7.0; };
  auto rank = [](size_t i) { return i; };
  CHECK(troupe::sched::chooseNode(3, *policy, policy->tieBreak(), equal, rank, draw) == 2);
  CHECK(asked == std::vector<int>{2, 3});
  // Without a stream (live) ties go to the rank.
  CHECK(troupe::sched::chooseNode(3, *policy, policy->tieBreak(), equal, rank) == 0);
}

}  // namespace
