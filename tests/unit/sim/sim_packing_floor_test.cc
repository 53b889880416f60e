// The hindsight packing floor (packing_floor.h) and how simulate reports it.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/sim_test_support.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sim/cluster.h"
#include "troupe/sim/packing_floor.h"
#include "troupe/sim/replay.h"
#include "troupe/sim/report.h"
#include "troupe/sim/trace.h"

namespace {

using troupe::sched::GpuRequest;

GpuRequest gpuRequest(int gpus, int64_t milli) {
  GpuRequest r;
  r.gpus = gpus;
  r.milli_per_gpu = milli;
  r.cpu_milli = 1000;
  return r;
}

int64_t idle(const std::vector<GpuRequest>& requests, int64_t gpus) {
  std::vector<const GpuRequest*> ptrs;
  for (const GpuRequest& r : requests) ptrs.push_back(&r);
  return troupe::sim::hindsightIdleMilli(ptrs, gpus);
}

TEST_CASE("floor: whole GPUs first, then shares best-fit decreasing", "[sim][floor]") {
  // Arrival order puts the shares first; with hindsight the whole GPU goes first and one 600
  // share cannot fit beside the other.
  CHECK(idle({gpuRequest(1, 600), gpuRequest(1, 600), gpuRequest(1, 1000)}, 2) == 400);
  // Decreasing: 700 and 600 open GPUs, 300 closes the 700's gap exactly, 400 the 600's.
  CHECK(idle({gpuRequest(1, 300), gpuRequest(1, 400), gpuRequest(1, 700), gpuRequest(1, 600)}, 2) == 0);
  // Best fit: 500 opens a GPU and 450 joins it (gap 50); 200 cannot use the 50 gap, so it opens
  // GPU 2; the 50 then closes the 50 gap rather than cutting into GPU 2's 800.
  CHECK(idle({gpuRequest(1, 50), gpuRequest(1, 200), gpuRequest(1, 450), gpuRequest(1, 500)}, 2) == 800);
  // CPU-only requests take no GPU; an 8-GPU request takes 8 whole GPUs.
  CHECK(idle({gpuRequest(0, 0), gpuRequest(8, 1000)}, 10) == 2000);
  // More whole GPUs than the cluster has: the rest stays unplaced, nothing is idle.
  CHECK(idle({gpuRequest(8, 1000), gpuRequest(4, 1000)}, 10) == 0);
  CHECK(idle({}, 3) == 3000);
}

TEST_CASE("floor: hindsight beats the arrival order", "[sim][floor]") {
  // Arriving in this order, three 300s share one GPU and the third 700 finds no room (700 idle);
  // sorted, each 700 opens a GPU and a 300 fills it.
  std::vector<GpuRequest> requests;
  for (int64_t m : {300, 300, 300, 700, 700, 700}) requests.push_back(gpuRequest(1, m));
  CHECK(idle(requests, 3) == 0);
}

TEST_CASE("floor: replay reports it per seed, the same for every policy and under each", "[sim][floor]") {
  const troupe::testing::ExampleTrace trace = troupe::testing::exampleTrace();
  troupe::model::TopologyCatalog catalog;
  auto cluster = troupe::sim::buildCluster(trace.nodes, catalog);
  REQUIRE(cluster.isOk());
  troupe::sim::Report report;
  for (const char* kind : {"troupe", "fgd", "best-fit", "random"}) {
    troupe::sim::PolicyRuns runs{kind, {}};
    for (int64_t seed : {42, 43, 44}) {
      troupe::sim::ReplayInput in;
      in.cluster = &cluster.value();
      in.sorted_pods = &trace.pods;
      in.seed = seed;
      in.policy = troupe::sched::builtinPolicies().create(kind).value();
      runs.runs.push_back(troupe::sim::replay(in));
    }
    report.policies.push_back(std::move(runs));
  }
  const std::vector<double> floor = troupe::sim::floorPercent(report);
  REQUIRE(floor.size() == 3);
  for (const troupe::sim::PolicyRuns& p : report.policies) {
    const std::vector<double> unallocated = troupe::sim::unallocatedAt(p, 100);
    REQUIRE(unallocated.size() == 3);
    for (size_t s = 0; s < 3; ++s) {
      INFO(p.policy << " seed " << s);
      REQUIRE(p.runs[s].floor_idle_milli.has_value());
      CHECK(*p.runs[s].floor_idle_milli == *report.policies.front().runs[s].floor_idle_milli);
      CHECK(floor[s] >= 0.0);
      CHECK(floor[s] <= unallocated[s] + 1e-9);
    }
  }
  CHECK(troupe::sim::renderJson(report).find("\"floor_percent_100\": {\"mean\": ") != std::string::npos);
  CHECK(troupe::sim::renderTable(report).find("floor @100%: ") != std::string::npos);
}

TEST_CASE("floor: a workload that never reaches 100% has none", "[sim][floor]") {
  troupe::model::TopologyCatalog catalog;
  auto cluster = troupe::sim::buildCluster({{"n", 8000, 4096, 2, "T4"}}, catalog);
  REQUIRE(cluster.isOk());
  std::vector<troupe::sim::TracePod> pods{{"a", 1000, 100, 1, 500, ""}};
  troupe::sim::ReplayInput in;
  in.cluster = &cluster.value();
  in.sorted_pods = &pods;
  in.in_order = true;
  in.policy = troupe::sched::builtinPolicies().create("fgd").value();
  const troupe::sim::RunResult r = troupe::sim::replay(in);
  CHECK_FALSE(r.floor_idle_milli.has_value());
  troupe::sim::Report report;
  report.policies.push_back({"fgd", {r}});
  CHECK(troupe::sim::floorPercent(report).empty());
  CHECK(troupe::sim::renderJson(report).find("\"floor_percent_100\": null") != std::string::npos);
}

}  // namespace
