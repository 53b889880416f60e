// gpu_spec in the simulator as in the FGD artifact: a constrained pod's shape is a typical pod
// of its own, and FGD keeps GPUs of a model free for the pods that can only use that model,
// however many typical shapes come before it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sim/cluster.h"
#include "troupe/sim/replay.h"
#include "troupe/sim/report.h"
#include "troupe/sim/summary.h"
#include "troupe/sim/trace.h"
#include "troupe/sim/workload.h"

namespace {

using troupe::sim::TracePod;

// Two one-GPU nodes with room for every pod's CPU and memory: "t4" (index 0) and "v100" (1).
// Pods: 64 CPU-only fillers of distinct CPU sizes, "a" (a whole T4 only), "x" (a whole GPU of
// any model) and two small CPU-only pods. All shapes occur once, so FGD's typical pods are the
// fillers (larger first), then a, where 95% of the 68 pods is covered: a is typical pod 65.
std::vector<TracePod> workload() {
  std::vector<TracePod> pods{{"a", 500, 1, 1, 1000, "T4"}, {"c1", 1, 1, 0, 0, ""}, {"c2", 2, 1, 0, 0, ""}};
  for (int i = 0; i < 64; ++i) {
    pods.push_back({"f" + std::string(i < 10 ? "0" : "") + std::to_string(i), 1000 + i, 1, 0, 0, ""});
  }
  pods.push_back({"x", 100, 1, 1, 1000, ""});
  return pods;  // sorted by name, as the replay takes them
}

}  // namespace

TEST_CASE("FGD leaves the T4 to the pod that can only use a T4, on every seed") {
  troupe::model::TopologyCatalog catalog;
  auto built = troupe::sim::buildCluster(
      {{"t4", 1000000, 1048576, 1, "T4"}, {"v100", 1000000, 1048576, 1, "V100M16"}}, catalog);
  REQUIRE(built.isOk());
  const troupe::sim::Cluster& cluster = built.value();
  const std::vector<TracePod> pods = workload();
  REQUIRE(std::is_sorted(pods.begin(), pods.end(),
                         [](const TracePod& l, const TracePod& r) { return l.name < r.name; }));
  const int a = 0, x = static_cast<int>(pods.size()) - 1;
  // When x arrives first, FGD's score (F in milli-GPU, p = 1/65 per typical pod):
  //   on t4:   F falls by 64/65 x 1000 (the fillers); a fits before, and after x nothing is
  //            left to strand: int(100 sigmoid(0.985)) = 72;
  //   on v100: a cannot use the V100 at all, so its 1/65 x 1000 falls as well:
  //            int(100 sigmoid(1.000)) = 73. x goes to v100 and a still finds its T4.
  // Treating a as "no access" everywhere (typical pods past the 64th were) makes both 73, and
  // the seeded node order then hands the T4 to x on the seeds where t4 ranks first: a is lost
  // (of seeds 42..51, on seed 45).
  int seeds_where_the_order_alone_would_give_x_the_t4 = 0;
  for (int64_t seed = 42; seed <= 51; ++seed) {
    // Tuning off (the two GPU pods already ask more than 0.01 x capacity): no clones.
    troupe::sim::RunPlan plan = troupe::sim::planRun(pods, 2, cluster.gpu_milli(), seed, 0.01);
    REQUIRE(plan.order.size() == pods.size());
    const auto at = [&](int pod) {
      return static_cast<size_t>(std::find(plan.order.begin(), plan.order.end(), pod) - plan.order.begin());
    };
    if (at(x) < at(a) && plan.node_rank[0] < plan.node_rank[1]) {
      ++seeds_where_the_order_alone_would_give_x_the_t4;
    }
    troupe::sim::ReplayInput in;
    in.cluster = &cluster;
    in.sorted_pods = &pods;
    in.seed = seed;
    in.tune_ratio = 0.01;
    in.policy = troupe::sched::builtinPolicies().create("fgd").value();
    troupe::sim::RunResult r = troupe::sim::replay(in);
    INFO("seed " << seed);
    CHECK(r.placed == static_cast<int>(pods.size()));
    CHECK(r.curve.back().used_milli == 2000);
    CHECK(r.node_of[at(a)] == 0);
    CHECK(r.node_of[at(x)] == 1);
  }
  CHECK(seeds_where_the_order_alone_would_give_x_the_t4 >= 1);
}

// The FGD artifact's own constrained trace, gpuspec33: the default pod list with the gpu_spec
// column of tests/data/fgd-artifact/ (a third of the GPU pods limited to GPU models). The
// artifact publishes FGD's allocation seed by seed (analysis_allo_discrete.csv); fgd lands on
// every one of them. The troupe policy, which leaves scarce models to the pods that need them,
// leaves well under half of FGD's GPUs unallocated there. Two seeds, as for the default trace.
TEST_CASE("faithfulness: FGD on the artifact's gpuspec33 trace lands on the published seeds", "[sim]") {
  std::optional<std::string> shared = troupe::testing::sharedDir();
  const std::string data = (shared ? *shared : std::string("../shared")) + "/data/alibaba-gpu-v2023/";
  auto node_text = troupe::testing::readFile(data + "openb_node_list_gpu_node.csv");
  auto pod_text = troupe::testing::readFile(data + "openb_pod_list_default.csv");
  if (!node_text || !pod_text) {
    WARN("skipped: the openb trace is not in " + data + " (set TROUPE_SHARED_DIR to the shared folder)");
    return;
  }
  auto models_text = troupe::testing::readFile(troupe::testing::sourceDir() +
                                               "/tests/data/fgd-artifact/gpuspec33-models.csv");
  REQUIRE(models_text);
  std::map<std::string, std::string> models;
  std::istringstream lines(*models_text);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    const size_t comma = line.find(',');
    REQUIRE(comma != std::string::npos);
    models[line.substr(0, comma)] = line.substr(comma + 1);
  }
  REQUIRE(models.size() == 2388);
  auto nodes = troupe::sim::parseNodeCsv(*node_text, "openb_node_list_gpu_node.csv");
  auto pods = troupe::sim::parsePodCsv(*pod_text, "openb_pod_list_default.csv");
  REQUIRE(nodes.isOk());
  REQUIRE(pods.isOk());
  std::vector<TracePod> sorted = pods.value();
  size_t constrained = 0;
  for (TracePod& p : sorted) {
    if (auto it = models.find(p.name); it != models.end()) {
      p.gpu_spec = it->second;
      ++constrained;
    }
  }
  REQUIRE(constrained == models.size());
  std::sort(sorted.begin(), sorted.end(),
            [](const TracePod& a, const TracePod& b) { return a.name < b.name; });
  troupe::model::TopologyCatalog catalog;
  auto cluster = troupe::sim::buildCluster(nodes.value(), catalog);
  REQUIRE(cluster.isOk());

  auto unallocated = [&](std::string_view kind) {
    troupe::sim::PolicyRuns runs{std::string(kind), {}};
    for (int64_t seed : {42, 43}) {
      troupe::sim::ReplayInput in;
      in.cluster = &cluster.value();
      in.sorted_pods = &sorted;
      in.seed = seed;
      in.policy = troupe::sched::builtinPolicies().create(kind).value();
      runs.runs.push_back(troupe::sim::replay(in));
    }
    return troupe::sim::unallocatedAt(runs, 100);
  };
  const std::vector<double> fgd = unallocated("fgd");
  REQUIRE(fgd.size() == 2);
  // Published (rounded to two decimals): 12.13 on seed 42, 12.11 on seed 43.
  CHECK(fgd[0] == Approx(12.13).margin(0.005));
  CHECK(fgd[1] == Approx(12.11).margin(0.005));
  const std::vector<double> troupe_policy = unallocated("troupe");
  REQUIRE(troupe_policy.size() == 2);
  CHECK(troupe::sim::spreadOf(troupe_policy).mean < 0.6 * troupe::sim::spreadOf(fgd).mean);
}
