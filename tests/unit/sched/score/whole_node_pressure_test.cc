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

TEST_CASE("troupe: a penalty for breaking whole nodes, within a point while the slots are enough",
          "[whole-node]") {
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
  // c = share x free milli-GPU / (8000 x slots): the whole-node pods expected until the cluster
  // is full, against the slots left (one here). Up to c = 1 the penalty stays below a whole
  // point: it only reorders nodes of (near) equal fragmentation.
  auto at = [&](double c) {
    return ours->wholeNodePenalty(whole, gpus(1), WholeNodePressure::compute(c, 8000, 1));
  };
  CHECK(at(0.5) == Approx(0.8 * 0.5 / 0.7));
  CHECK(at(1.0) == Approx(0.8 / 1.2));
  CHECK(at(1.0) < 1.0);
  // Past it, each slot broken is a whole-node pod turned away: the penalty overrides a point of
  // fragmentation, growing with c and bounded by 0.8 + 2.
  CHECK(at(2.0) == Approx(0.8 * 2.0 / 2.2 + 2.0 * 0.5));
  CHECK(at(2.0) > 1.0);
  CHECK(at(4.0) > at(2.0));
  CHECK(at(1000.0) < 2.8);
  // Nothing for the whole-node job itself, a node with no slot, CPU-only pods, or other policies.
  CHECK(ours->wholeNodePenalty(whole, gpus(8), high) == 0.0);
  CHECK(ours->wholeNodePenalty(used, gpus(1), high) == 0.0);
  CHECK(ours->wholeNodePenalty(whole, gpus(0), high) == 0.0);
  CHECK(ours->wholeNodePenalty(whole, gpus(1), WholeNodePressure{}) == 0.0);
  CHECK(fgd->wholeNodePenalty(whole, gpus(1), high) == 0.0);
}

TEST_CASE("request mix: whole-node demand by the CPU its requests ask", "[whole-node]") {
  GpuRequest big = gpus(8), bigger = gpus(16), other = gpus(8), small = gpus(1);
  big.cpu_milli = 88000;
  bigger.cpu_milli = 64000;
  other.cpu_milli = 64000;
  small.cpu_milli = 4000;
  // 8 + 16 + 8 + 1 GPUs: 24 of them at 64 cores, 8 at 88.
  const RequestMix mix = RequestMix::fromRequests({big, bigger, other, small});
  REQUIRE(mix.wholeNodeDemand().size() == 2);
  CHECK(mix.wholeNodeDemand()[0].cpu_milli == 64000);
  CHECK(mix.wholeNodeDemand()[0].share == Approx(24.0 / 33));
  CHECK(mix.wholeNodeDemand()[1].cpu_milli == 88000);
  CHECK(mix.wholeNodeDemand()[1].share == Approx(8.0 / 33));
  CHECK(RequestMix::fromRequests({small}).wholeNodeDemand().empty());
  // Six CPU sizes thin to four levels, the least kept and the shares kept whole.
  std::vector<GpuRequest> many;
  for (int64_t cores : {10, 20, 30, 40, 50, 60}) {
    many.push_back(gpus(8));
    many.back().cpu_milli = cores * 1000;
  }
  const std::vector<troupe::sched::WholeNodeDemand> levels = RequestMix::fromRequests(many).wholeNodeDemand();
  REQUIRE(levels.size() == RequestMix::kWholeNodeLevels);
  CHECK(levels.front().cpu_milli == 10000);
  double total = 0;
  for (const auto& l : levels) total += l.share;
  CHECK(total == Approx(1.0));
}

TEST_CASE("whole-node slots: room for the whole-node pod's CPU too", "[whole-node]") {
  SmallCluster cluster;
  NodeState& node = cluster.add("n", 8, "NVIDIA-L4", "96");
  // 8 free GPUs and 96 cores: room for one 64-core 8-GPU pod; GPUs alone count the same.
  CHECK(WholeNodePressure::slotsOf(node, 64000) == 1);
  GpuRequest cpu_only = gpus(0);
  cpu_only.cpu_milli = 40000;
  // A CPU-only pod that leaves 56 cores uses the slot up; one that leaves 76 does not; counting
  // GPUs only (0), no CPU-only pod does.
  CHECK(WholeNodePressure::slotsTaken(node, cpu_only, 64000) == 1);
  CHECK(WholeNodePressure::slotsTaken(node, cpu_only, 0) == 0);
  cpu_only.cpu_milli = 20000;
  CHECK(WholeNodePressure::slotsTaken(node, cpu_only, 64000) == 0);
  // A 1-GPU pod with 30 cores uses it up by its CPU, as any by its GPU.
  GpuRequest one = gpus(1);
  one.cpu_milli = 30000;
  CHECK(WholeNodePressure::slotsTaken(node, one, 64000) == 1);
  // Once CPU-only pods hold 70 cores, the free GPUs have no room for a whole-node pod left: no
  // slot, so nothing for a GPU pod to use up there. By GPUs alone it would still count.
  SmallCluster::use(node, {}, 0, 70000);
  CHECK(WholeNodePressure::slotsOf(node, 64000) == 0);
  CHECK(WholeNodePressure::slotsOf(node, 0) == 1);
  CHECK(WholeNodePressure::slotsTaken(node, one, 64000) == 0);
  // Nodes that do not track CPU count GPUs only.
  NodeState& untracked = cluster.add("u", 8);
  CHECK(WholeNodePressure::slotsOf(untracked, 64000) == 1);
  CHECK(WholeNodePressure::slotsTaken(untracked, cpu_only, 64000) == 0);
}

TEST_CASE("whole-node pressure: a placement pays for each CPU level whose room it uses up", "[whole-node]") {
  SmallCluster cluster;
  NodeState& g2 = cluster.add("g2", 8, "NVIDIA-L4", "96");
  NodeState& g3 = cluster.add("g3", 8, "NVIDIA-L4", "128");
  // 20% of the request in 64-core whole-node pods (two slots: both nodes), 5% in 120-core ones
  // (one slot: only g3 has the cores).
  const WholeNodePressure p = WholeNodePressure::compute({{64000, 0.2}, {120000, 0.05}}, 160000, {2, 1});
  REQUIRE(p.levels().size() == 2);
  CHECK(p.levels()[0].value == Approx(0.2 * 160000 / (8000.0 * 2)));
  CHECK(p.levels()[1].value == Approx(0.05 * 160000 / (8000.0 * 1)));
  CHECK(p.value() == Approx(p.levels()[0].value + p.levels()[1].value));
  // A 1-GPU pod uses up the 64-core room on g2, both on g3.
  CHECK(p.usedUpBy(g2, gpus(1)) == Approx(p.levels()[0].value));
  CHECK(p.usedUpBy(g3, gpus(1)) == Approx(p.value()));
  // A CPU-only pod of 20 cores leaves g3 108: the 120-core room only.
  GpuRequest cpu_only = gpus(0);
  cpu_only.cpu_milli = 20000;
  CHECK(p.usedUpBy(g3, cpu_only) == Approx(p.levels()[1].value));
  CHECK(p.usedUpBy(g2, cpu_only) == 0.0);
  // A level with no slot left has no pressure.
  CHECK(WholeNodePressure::compute({{64000, 0.2}, {120000, 0.05}}, 160000, {2, 0}).levels().size() == 1);
}
