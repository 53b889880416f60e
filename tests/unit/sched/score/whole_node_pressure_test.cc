// Whole-node pressure (whole_node_pressure.h): the mix's demand for whole 8-GPU nodes against
// the whole nodes left, and the troupe policy keeping nodes whole while it lasts.
#include "troupe/sched/score/whole_node_pressure.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/policy_test_support.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/request/request_mix.h"

namespace {

using troupe::model::NodeState;
using troupe::sched::GpuRequest;
using troupe::sched::RequestMix;
using troupe::sched::WholeNodePressure;
using troupe::testing::SmallCluster;

GpuRequest gpus(int n, int64_t milli = 1000) {
  GpuRequest r;
  r.gpus = n;
  r.milli_per_gpu = milli;
  return r;
}

}  // namespace

TEST_CASE("request mix: whole-node requests' share of the GPU request", "[whole-node]") {
  GpuRequest cpu_only = gpus(0);
  const RequestMix mix =
      RequestMix::fromRequests({gpus(8), gpus(1), gpus(1, 500), gpus(16), cpu_only, gpus(4)});
  // 8 + 16 of 8 + 1 + 0.5 + 16 + 4 GPUs.
  CHECK(mix.wholeNodeShare() == Approx(24.0 / 29.5));
  CHECK(RequestMix::fromRequests({gpus(4), gpus(1)}).wholeNodeShare() == 0.0);
  CHECK(RequestMix::fromRequests({}).wholeNodeShare() == 0.0);
}

TEST_CASE("whole-node pressure: the share's request against the slots left", "[whole-node]") {
  CHECK(WholeNodePressure::compute(0.0, 80000, 4).empty());
  CHECK(WholeNodePressure::compute(0.1, 80000, 0).empty());
  CHECK(WholeNodePressure::compute(0.1, 0, 3).empty());
  // 10% of 80 free GPUs asked as whole nodes, 2 slots of 8: 8 / 16.
  CHECK(WholeNodePressure::compute(0.1, 80000, 2).value() == Approx(0.5));
  // Fewer slots, more pressure.
  CHECK(WholeNodePressure::compute(0.1, 80000, 1).value() >
        WholeNodePressure::compute(0.1, 80000, 2).value());
}

TEST_CASE("whole-node slots: what a placement uses up, on random nodes", "[whole-node]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    SmallCluster cluster;
    const int size = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 16 : 8;
    NodeState& node = cluster.add("n", size);
    // Random whole and shared pods on it.
    const int pods = std::uniform_int_distribution<int>(0, 5)(rng);
    for (int p = 0; p < pods; ++p) {
      const int g = std::uniform_int_distribution<int>(0, size - 1)(rng);
      const int64_t milli = std::uniform_int_distribution<int>(0, 1)(rng) ? 1000 : 300;
      if (node.gpuFreeMilli(g) >= milli) SmallCluster::use(node, {g}, milli);
    }
    const int free_whole = node.wholeFreeCount();
    CHECK(WholeNodePressure::slotsOf(node) == free_whole / 8);
    // A request of n whole GPUs takes n fully free ones.
    const int n = std::uniform_int_distribution<int>(1, 8)(rng);
    const int expect_whole =
        n > free_whole ? WholeNodePressure::slotsOf(node) : free_whole / 8 - (free_whole - n) / 8;
    if (n <= free_whole) CHECK(WholeNodePressure::slotsTaken(node, gpus(n)) == expect_whole);
    // A share takes a fully free GPU only where no partly used one has room.
    bool partly_fits = false;
    for (int g = 0; g < size; ++g) {
      partly_fits |= node.gpuUsedMilli(g) > 0 && node.gpuFreeMilli(g) >= 400;
    }
    const int share_taken = WholeNodePressure::slotsTaken(node, gpus(1, 400));
    CHECK(share_taken == (partly_fits || free_whole == 0 ? 0 : free_whole / 8 - (free_whole - 1) / 8));
    CHECK(WholeNodePressure::slotsTaken(node, gpus(0)) == 0);
  }
}

TEST_CASE("troupe: a penalty for breaking whole nodes, saturating in the pressure", "[whole-node]") {
  SmallCluster cluster;
  NodeState& whole = cluster.add("whole", 8);
  NodeState& used = cluster.add("used", 8);
  SmallCluster::use(used, {0});
  const auto ours = troupe::sched::builtinPolicies().create("troupe").value();
  const auto fgd = troupe::sched::builtinPolicies().create("fgd").value();
  const WholeNodePressure low = WholeNodePressure::compute(0.01, 80000, 10);
  const WholeNodePressure high = WholeNodePressure::compute(0.5, 80000, 1);
  CHECK(ours->wholeNodePenalty(whole, gpus(1), low) > 0.0);
  CHECK(ours->wholeNodePenalty(whole, gpus(1), low) < 0.05);
  CHECK(ours->wholeNodePenalty(whole, gpus(1), high) > ours->wholeNodePenalty(whole, gpus(1), low));
  // Below a whole point: it never overrides a clear difference in fragmentation.
  CHECK(ours->wholeNodePenalty(whole, gpus(1), WholeNodePressure::compute(1.0, 1000000, 1)) < 1.0);
  // Nothing for the whole-node job itself, a node with no slot, CPU-only pods, or other policies.
  CHECK(ours->wholeNodePenalty(whole, gpus(8), high) == 0.0);
  CHECK(ours->wholeNodePenalty(used, gpus(1), high) == 0.0);
  CHECK(ours->wholeNodePenalty(whole, gpus(0), high) == 0.0);
  CHECK(ours->wholeNodePenalty(whole, gpus(1), WholeNodePressure{}) == 0.0);
  CHECK(fgd->wholeNodePenalty(whole, gpus(1), high) == 0.0);
}
