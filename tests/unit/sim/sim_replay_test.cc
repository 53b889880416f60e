// The simulator: the seeded tie-break, and faithfulness to the FGD paper on the real trace.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "support/fixtures.h"
#include "support/sim_test_support.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sim/cluster.h"
#include "troupe/sim/replay.h"
#include "troupe/sim/report.h"
#include "troupe/sim/summary.h"
#include "troupe/sim/trace.h"

namespace {

using troupe::sim::Cluster;
using troupe::sim::RunResult;
using troupe::sim::TraceNode;
using troupe::sim::TracePod;

Cluster clusterOf(const std::vector<TraceNode>& nodes, troupe::model::TopologyCatalog& catalog) {
  auto c = troupe::sim::buildCluster(nodes, catalog);
  REQUIRE(c.isOk());
  return std::move(c).value();
}

RunResult run(const Cluster& cluster, const std::vector<TracePod>& pods, std::string_view kind, int64_t seed,
              double tune = troupe::sim::kDefaultTuneRatio) {
  troupe::sim::ReplayInput in;
  in.cluster = &cluster;
  in.sorted_pods = &pods;
  in.seed = seed;
  in.tune_ratio = tune;
  in.policy = troupe::sched::builtinPolicies().create(kind).value();
  return troupe::sim::replay(in);
}

TEST_CASE("equal scores go to the node ranked first by the seeded permutation") {
  troupe::model::TopologyCatalog catalog;
  std::vector<TraceNode> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back({"node-" + std::to_string(i), 32000, 65536, 2, "T4"});
  Cluster cluster = clusterOf(nodes, catalog);
  std::vector<TracePod> pods{{"pod-0", 1000, 1024, 1, 1000, ""}};
  for (int64_t seed : {42, 43, 44}) {
    // Tuning off (the one pod already asks more than 0.01 x capacity): one pod, all nodes tie.
    troupe::sim::RunPlan plan = troupe::sim::planRun(pods, 6, cluster.gpu_milli(), seed, 0.01);
    const int first = static_cast<int>(std::min_element(plan.node_rank.begin(), plan.node_rank.end()) -
                                       plan.node_rank.begin());
    for (std::string_view kind : {"best-fit", "fgd", "troupe"}) {
      RunResult r = run(cluster, pods, kind, seed, 0.01);
      REQUIRE(r.node_of.size() == 1);
      CHECK(r.node_of[0] == first);
    }
  }
}

TEST_CASE("a pod that fits nowhere is dropped, and still counts as arrived") {
  troupe::model::TopologyCatalog catalog;
  Cluster cluster = clusterOf({{"n", 8000, 4096, 1, "T4"}}, catalog);
  std::vector<TracePod> pods{{"a", 1000, 100, 1, 600, ""}, {"b", 1000, 100, 1, 600, ""}};
  RunResult r = run(cluster, pods, "best-fit", 42, 0.01);
  REQUIRE(r.curve.size() == 2);
  CHECK(r.placed == 1);
  CHECK(r.curve[1].arrived_milli == 1200);
  CHECK(r.curve[1].used_milli == 600);
  CHECK((r.node_of[0] == -1) != (r.node_of[1] == -1));
}

TEST_CASE("the bundled example trace runs every policy") {
  const troupe::testing::ExampleTrace trace = troupe::testing::exampleTrace();
  troupe::model::TopologyCatalog catalog;
  Cluster cluster = clusterOf(trace.nodes, catalog);
  for (const std::string& kind : troupe::sched::builtinPolicies().names()) {
    RunResult r = run(cluster, trace.pods, kind, 42);
    INFO(kind);
    CHECK(r.placed > r.pods / 2);
    CHECK(troupe::sim::allocationAt(r, 100).has_value());
  }
}

TEST_CASE("requests by size: the tallies add up to the run's prefix up to 100% arrived") {
  const troupe::testing::ExampleTrace trace = troupe::testing::exampleTrace();
  troupe::model::TopologyCatalog catalog;
  Cluster cluster = clusterOf(trace.nodes, catalog);
  for (std::string_view kind : {"troupe", "fgd", "random"}) {
    for (int64_t seed : {42, 43}) {
      const RunResult r = run(cluster, trace.pods, kind, seed);
      INFO(kind << " seed " << seed);
      // The steps within 100% form a prefix (arrived only grows).
      int steps = 0, failed = 0;
      int64_t arrived = 0, used = 0;
      for (size_t i = 0; i < r.curve.size() && r.curve[i].arrived_milli <= cluster.gpu_milli(); ++i) {
        ++steps;
        failed += r.node_of[i] < 0 ? 1 : 0;
        arrived = r.curve[i].arrived_milli;
        used = r.curve[i].used_milli;
      }
      int pods = 0, failed_sum = 0;
      int64_t milli = 0, placed = 0;
      for (const troupe::sim::SizeTally& t : r.by_size) {
        CHECK(t.failed <= t.pods);
        CHECK(t.placed_milli <= t.milli);
        pods += t.pods;
        failed_sum += t.failed;
        milli += t.milli;
        placed += t.placed_milli;
      }
      CHECK(pods == steps);
      CHECK(failed_sum == failed);
      CHECK(milli == arrived);
      CHECK(placed == used);
      // CPU-only pods ask no GPU.
      CHECK(r.by_size[static_cast<size_t>(troupe::sim::SizeClass::kCpu)].milli == 0);
    }
  }
  troupe::sched::GpuRequest req;
  req.gpus = 0;
  CHECK(troupe::sim::sizeClassOf(req) == troupe::sim::SizeClass::kCpu);
  req.gpus = 1;
  req.milli_per_gpu = 500;
  CHECK(troupe::sim::sizeClassOf(req) == troupe::sim::SizeClass::kShare);
  req.milli_per_gpu = 1000;
  CHECK(troupe::sim::sizeClassOf(req) == troupe::sim::SizeClass::kOne);
  req.gpus = 3;
  CHECK(troupe::sim::sizeClassOf(req) == troupe::sim::SizeClass::kTwo);
  req.gpus = 4;
  CHECK(troupe::sim::sizeClassOf(req) == troupe::sim::SizeClass::kFour);
  req.gpus = 16;
  CHECK(troupe::sim::sizeClassOf(req) == troupe::sim::SizeClass::kEight);
  CHECK(troupe::sim::sizeClassName(static_cast<size_t>(troupe::sim::SizeClass::kEight)) == "8+");
}

// The FGD paper's published means over seeds 42..51 (default trace, arrived = 100%).
// CI runs two seeds; a two-seed mean still lands within the one-point acceptance band.
TEST_CASE("faithfulness: best-fit and FGD on the openb trace land on the published figures") {
  std::optional<std::string> shared = troupe::testing::sharedDir();
  const std::string data = (shared ? *shared : std::string("../shared")) + "/data/alibaba-gpu-v2023/";
  auto node_text = troupe::testing::readFile(data + "openb_node_list_gpu_node.csv");
  auto pod_text = troupe::testing::readFile(data + "openb_pod_list_default.csv");
  if (!node_text || !pod_text) {
    WARN("skipped: the openb trace is not in " + data + " (set TROUPE_SHARED_DIR to the shared folder)");
    return;
  }
  auto nodes = troupe::sim::parseNodeCsv(*node_text, "openb_node_list_gpu_node.csv");
  auto pods = troupe::sim::parsePodCsv(*pod_text, "openb_pod_list_default.csv");
  REQUIRE(nodes.isOk());
  REQUIRE(pods.isOk());
  std::vector<TracePod> sorted = pods.value();
  std::sort(sorted.begin(), sorted.end(),
            [](const TracePod& a, const TracePod& b) { return a.name < b.name; });
  troupe::model::TopologyCatalog catalog;
  Cluster cluster = clusterOf(nodes.value(), catalog);
  REQUIRE(cluster.nodes.size() == 1213);
  REQUIRE(cluster.gpus == 6212);

  auto unallocated = [&](std::string_view kind) {
    troupe::sim::PolicyRuns runs{std::string(kind), {}};
    for (int64_t seed : {42, 43}) runs.runs.push_back(run(cluster, sorted, kind, seed));
    return troupe::sim::unallocatedAt(runs, 100);
  };
  const std::vector<double> best_fit = unallocated("best-fit");
  const std::vector<double> fgd = unallocated("fgd");
  const std::vector<double> troupe_policy = unallocated("troupe");
  REQUIRE(best_fit.size() == 2);
  REQUIRE(fgd.size() == 2);
  REQUIRE(troupe_policy.size() == 2);
  CHECK(troupe::sim::spreadOf(best_fit).mean == Approx(7.14).margin(1.0));
  CHECK(troupe::sim::spreadOf(fgd).mean == Approx(4.77).margin(1.0));
  // With Go's RNG the runs are the artifact's own, seed by seed (regression guard; the
  // ten-seed means equal the published 7.14 and 4.77 exactly).
  CHECK(fgd[0] == Approx(4.8566).margin(0.0001));
  CHECK(fgd[1] == Approx(4.9400).margin(0.0001));
  CHECK(troupe::sim::spreadOf(troupe_policy).mean <= troupe::sim::spreadOf(fgd).mean);
}

}  // namespace
